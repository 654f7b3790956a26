"""Reference kernels of the course, tested and within their access budgets.

Lectures show their source (`gpucourse.show_source`) and launch them; later
modules reuse them.
"""
