"""A wheel of the course package from ``pyproject.toml`` and ``lib/``, made with the standard library alone.

The student edition carries it so that the setup cell can install the course on Colab
with no hosted repository. No build backend is run (it would have to be downloaded):
the package is pure Python, so the wheel is its files under ``lib/`` and the
metadata that pyproject.toml's ``[project]`` table gives (PEP 427, core metadata 2.1).
"""

from __future__ import annotations

import base64
import hashlib
import tomllib
import zipfile
from pathlib import Path

PACKAGE_DIR = "lib"
LEFT_OUT = ("__pycache__", ".ipynb_checkpoints")
FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the same sources give the same wheel, byte for byte


def metadata(project: dict) -> str:
    """The METADATA file of ``project`` (pyproject.toml's ``[project]``)."""
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}",
             f"Summary: {project.get('description', '')}"]
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Requires-Dist: {requirement}" for requirement in project.get("dependencies", [])]
    for extra, requirements in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f"Requires-Dist: {in_extra(requirement, extra)}" for requirement in requirements]
    return "\n".join(lines) + "\n"


def in_extra(requirement: str, extra: str) -> str:
    """``requirement`` asked for by ``extra`` only: its own environment marker, if any, and ``extra == ...``."""
    required, _, marker = requirement.partition(";")
    condition = f'extra == "{extra}"'
    return f"{required.strip()}; ({marker.strip()}) and {condition}" if marker.strip() else f"{required}; {condition}"


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(root: Path, out_dir: Path) -> Path:
    """Write ``<name>-<version>-py3-none-any.whl`` of the repository ``root`` into ``out_dir``; return its path."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name, version = project["name"], project["version"]
    package = root / PACKAGE_DIR / name
    if not (package / "__init__.py").is_file():
        raise FileNotFoundError(f"{package} is not a package")
    files = {path.relative_to(root / PACKAGE_DIR).as_posix(): path.read_bytes()
             for path in sorted(package.rglob("*"))
             if path.is_file() and not set(path.parts) & set(LEFT_OUT) and path.suffix != ".pyc"}
    info = f"{name}-{version}.dist-info"
    files[f"{info}/METADATA"] = metadata(project).encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: {__name__}\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n").encode()
    record = "".join(record_line(file, data) + "\n" for file, data in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as wheel:
        for file, data in files.items():
            wheel.writestr(zipfile.ZipInfo(file, FIXED_TIME), data, zipfile.ZIP_DEFLATED)
    return target
