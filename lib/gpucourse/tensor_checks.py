"""Old path of `gpucourse.grading`, for assignments released before the wings; removed in the next release."""

from .grading.moved import forward

__getattr__ = forward(__name__, "gpucourse.grading")
