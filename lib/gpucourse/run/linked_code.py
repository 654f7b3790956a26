"""A kernel linked with the CUDA C++ numba-cuda links into it, as a GPU's load links it, without a GPU.

numba-cuda implements some operations in CUDA C++ that it compiles with NVRTC and links when the kernel loads:
the float16 operators (numbast's bindings of ``cuda_fp16.h``: ``a - b`` of two float16 calls
``_ZmiRK6__halfS1__nbst``) and any ``cuda.declare_device`` given a ``CUSource``. The kernel's PTX alone then
declares those functions ``.extern``, and nvJitLink cannot assemble it (``ERROR_INTERNAL``). Where nvJitLink is
there, numba-cuda links with link-time optimization (its ``lto`` default): the C++ is inlined into the kernel
(``sub.f16``, not a call through the stack). `linked_ptx` does the same on the CPU: the kernel's LTO-IR (NVVM), each
C++ file's (NVRTC, with CUDA's headers where numba-cuda finds them: NVIDIA's wheels or a toolkit), linked by
nvJitLink into one PTX with no ``.extern``, which the course's assembler report and PTX counts then read.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from .ptx import target_device

EXTERN = ".extern .func"  # a PTX declaration of a function another module defines


class UnlinkableCode(RuntimeError):
    """Code numba-cuda links into a kernel that the course cannot link without a GPU."""


def needs_linking(ptx: str) -> bool:
    """Whether ``ptx`` calls a function that another module defines."""
    return EXTERN in ptx


@functools.lru_cache(maxsize=256)
def linked_ptx(py_func, argtypes: tuple, cc: tuple, launch_bounds=None) -> str:
    """The PTX of kernel ``py_func`` for ``argtypes`` on compute capability ``cc`` after link-time optimization with
    the CUDA C++ numba-cuda links into it; raises `UnlinkableCode`, saying why, where that cannot be done here."""
    from cuda.bindings import nvjitlink  # noqa: PLC0415
    from numba.cuda.compiler import _compile_pyfunc_with_fixup  # noqa: PLC0415, PLC2701 (keeps the linked files)

    with target_device(cc):
        library, _ = _compile_pyfunc_with_fixup(py_func, argtypes, device=False, cc=cc, abi="numba", lto=True,
                                                launch_bounds=launch_bounds)
        modules = [("kernel", library.get_ltoir(cc=cc))]
    modules += [(f"linked{k}", _ltoir(_source(code, py_func.__name__), cc))
                for k, code in enumerate(library._linking_files)]  # noqa: SLF001 (where numba-cuda 0.30 keeps them)
    options = [f"-arch=sm_{cc[0]}{cc[1]}", "-lto", "-ptx"]
    handle = nvjitlink.create(len(options), options)
    try:
        for name, ltoir in modules:
            nvjitlink.add_data(handle, nvjitlink.InputType.LTOIR, ltoir, len(ltoir), name)
        nvjitlink.complete(handle)
        ptx = bytearray(nvjitlink.get_linked_ptx_size(handle))
        nvjitlink.get_linked_ptx(handle, ptx)
    except nvjitlink.nvJitLinkError as error:
        raise UnlinkableCode(f"nvJitLink could not link {py_func.__name__} with the code numba-cuda links into it "
                             f"({error})") from None
    finally:
        nvjitlink.destroy(handle)
    return ptx.decode().rstrip("\x00")


def _source(code, kernel: str) -> str:
    """The CUDA C++ of one linked file: numba-cuda's ``CUSource``, or a path to a ``.cu`` file."""
    if getattr(code, "kind", None) == "cu":
        data = code.data
    elif isinstance(code, (str, os.PathLike)) and Path(code).suffix == ".cu":
        data = Path(code).read_text()
    else:
        raise UnlinkableCode(f"{kernel} links {Path(code).suffix or type(code).__name__} code; the course links only "
                             "CUDA C++ without a GPU: read its registers on a GPU")
    return data.decode() if isinstance(data, bytes) else data


def _include_dirs(nvrtc_major: int) -> list[str]:
    """Where numba-cuda's NVRTC looks for headers: CUDA's (``cuda_fp16.h``), numba-cuda's own, CCCL's."""
    import numba.cuda  # noqa: PLC0415
    from numba.cuda.cuda_paths import get_cuda_paths  # noqa: PLC0415

    folders = [get_cuda_paths()["include_dir"].info, str(Path(numba.cuda.__file__).parent / "include" /
                                                         str(nvrtc_major))]
    try:
        from cuda import pathfinder  # noqa: PLC0415

        cccl = pathfinder.locate_nvidia_header_directory("cccl")
        folders += [cccl.abs_path] if cccl is not None else []
    except Exception:  # noqa: BLE001 (CCCL serves code this course does not link)
        pass
    return [folder for folder in folders if folder]


@functools.lru_cache(maxsize=256)
def _ltoir(source: str, cc: tuple) -> bytes:
    """``source`` (CUDA C++) compiled by NVRTC to LTO-IR for compute capability ``cc``."""
    from cuda.bindings import nvrtc  # noqa: PLC0415

    _, major, _ = nvrtc.nvrtcVersion()
    options = [f"--gpu-architecture=compute_{cc[0]}{cc[1]}", "-rdc=true", "-dlto",
               *(f"-I{folder}" for folder in _include_dirs(major))]
    _, program = nvrtc.nvrtcCreateProgram(source.encode(), b"linked.cu", 0, [], [])
    try:
        (result,) = nvrtc.nvrtcCompileProgram(program, len(options), [option.encode() for option in options])
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(program)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(program, log)
            raise UnlinkableCode("NVRTC could not compile the CUDA C++ numba-cuda links into this kernel (CUDA's "
                                 "headers, such as cuda_fp16.h, come with the course's cu12 or cu13 extra): "
                                 + log.decode(errors="replace").strip("\x00 \n")[:400])
        _, size = nvrtc.nvrtcGetLTOIRSize(program)
        ltoir = b" " * size
        nvrtc.nvrtcGetLTOIR(program, ltoir)
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return ltoir
