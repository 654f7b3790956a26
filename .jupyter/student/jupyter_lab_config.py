"""`make lab`'s JupyterLab: the course's default settings (lab-settings/overrides.json) in place of the app's.

Code cells wrap their long lines: a test cell's line of 110 characters is cut at the window's edge on a
1280 x 720 screen with the file browser open, where a student would have to scroll to read it. And no toast asks
to fetch Jupyter's news over the first lecture.
"""

import os

c = get_config()  # noqa: F821 (Jupyter provides it)
c.LabApp.app_settings_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lab-settings")
