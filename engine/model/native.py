"""The CPU kernels of ``cpu_kernels.c``: built on first use with the machine's C compiler, called through ctypes.

The two kernels a decode step spends most of its time in (see the C file for what they do differently
from PyTorch's ops), :func:`small_batch_linear` and :func:`paged_decode_attention`, and a small one,
:func:`rms_norm`. They take fp32
CPU tensors; callers check :func:`kernels_for` first and otherwise use the PyTorch path, which is
also the reference the tests compare the kernels with.

The library is compiled once per source, compiler and CPU (``-march=native``) into the model cache
folder, in about a second; where there is no compiler, or ``PREFIXLAB_NATIVE_KERNELS=0``, everything
runs on the PyTorch paths (and a warning says why, once). It is loaded after torch, so its OpenMP
calls share torch's thread pool (one ``libgomp``): ``torch.set_num_threads`` sets its threads too.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("cpu_kernels.c")
#: -ffast-math lets the compiler vectorise the sums and exp (sums in another order than PyTorch's:
#: differences of ~1e-6 relative); the flags are kept off the link, which would otherwise switch the
#: whole process to flushing denormals to zero.
COMPILE_FLAGS = ("-O3", "-march=native", "-ffast-math", "-fopenmp", "-fPIC")
#: The kernel-side op applied to a matmul's result (cpu_kernels.c's enum).
OPS = {"none": 0, "silu": 1, "add": 2, "mul": 3}
#: A linear layer takes the small-batch kernel up to this many input rows (a decode step's batch);
#: from there on the matmul library's blocked GEMM is faster.
SMALL_BATCH_ROWS = 32

_P, _I = ctypes.c_void_p, ctypes.c_int64


def _cpu_signature() -> str:
    """What ``-march=native`` depends on: the CPU's model and feature flags."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    return "\n".join(sorted({line for line in lines if line.startswith(("model name", "flags"))}))


def _compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def _build(compiler: str, target: Path) -> None:
    """Compile the kernels into ``target`` (atomically: concurrent processes may build the same file)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        obj, lib = Path(tmp) / "kernels.o", Path(tmp) / "kernels.so"
        subprocess.run([compiler, *COMPILE_FLAGS, "-c", str(SOURCE), "-o", str(obj)], check=True, capture_output=True)
        subprocess.run([compiler, "-shared", "-fopenmp", str(obj), "-o", str(lib), "-lm"], check=True, capture_output=True)
        os.replace(lib, target)


@functools.cache
def library() -> ctypes.CDLL | None:
    """The compiled kernels, or None where they cannot be used here (with a warning saying why)."""
    if os.environ.get("PREFIXLAB_NATIVE_KERNELS", "1") == "0":
        return None
    compiler = _compiler()
    if compiler is None or platform.system() != "Linux" or not SOURCE.exists():
        log.warning("No C compiler found (or not Linux): the CPU kernels are off, decode steps run on PyTorch ops.")
        return None
    from engine.model.loader import cache_dir

    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256("\0".join([SOURCE.read_text(), version, " ".join(COMPILE_FLAGS), _cpu_signature()]).encode())
    target = cache_dir() / "kernels" / f"cpu_kernels-{key.hexdigest()[:16]}.so"
    try:
        if not target.exists():
            _build(compiler, target)
        lib = ctypes.CDLL(str(target))
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        log.warning("The CPU kernels did not build (%s %s): decode steps run on PyTorch ops.", exc,
                    detail.decode(errors="replace")[-500:])
        return None
    lib.small_batch_linear.argtypes = [_P, _P, _P, _P, _P, _I, _I, _I, _I]
    lib.small_batch_linear.restype = None
    lib.paged_decode_attention.argtypes = [_P, _P, _P, _P, _P, _P, _P, _I, _I, _I, _I, _I, _I, ctypes.c_float]
    lib.paged_decode_attention.restype = None
    lib.rms_norm.argtypes = [_P, _P, _P, _I, _I, ctypes.c_float]
    lib.rms_norm.restype = None
    return lib


def kernels_for(device: torch.device | str, dtype: torch.dtype) -> bool:
    """Whether the kernels run tensors of this device and dtype here (fp32 on the CPU, once built)."""
    return torch.device(device).type == "cpu" and dtype == torch.float32 and library() is not None


def _ptr(tensor: torch.Tensor | None) -> int | None:
    return None if tensor is None else tensor.data_ptr()


def small_batch_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, op: str = "none",
                       other: torch.Tensor | None = None) -> torch.Tensor:
    """``op(x @ weight.T + bias)``: ``op`` is ``none``, ``silu``, ``add`` (``+ other``) or ``mul`` (``* other``).

    ``x`` ``[m, k]`` (a few rows), ``weight`` ``[n, k]``, ``other`` ``[m, n]``; all fp32 on the CPU.
    """
    lib = library()
    assert lib is not None, "kernels_for() must be checked first"
    x = x.contiguous()
    m, k = x.shape
    n = weight.shape[0]
    out = torch.empty(m, n, dtype=x.dtype)
    if other is not None:
        other = other.contiguous()
    lib.small_batch_linear(x.data_ptr(), weight.data_ptr(), _ptr(bias), _ptr(other), out.data_ptr(), m, n, k, OPS[op])
    return out


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm of each row of ``x`` ``[rows, dim]`` scaled by ``weight`` ``[dim]``; fp32 on the CPU."""
    lib = library()
    assert lib is not None, "kernels_for() must be checked first"
    x = x.contiguous()
    out = torch.empty_like(x)
    lib.rms_norm(x.data_ptr(), weight.data_ptr(), out.data_ptr(), x.numel() // x.shape[-1], x.shape[-1], eps)
    return out


def paged_decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
                           context_lens: torch.Tensor, first_positions: torch.Tensor | None, scale: float) -> torch.Tensor:
    """One query token per request over its K/V pages, read in place: ``[num_seqs, num_heads, head_dim]``.

    ``q`` ``[num_seqs, num_heads, head_dim]``; ``k_cache``/``v_cache`` one layer's pages ``[num_blocks,
    block_size, num_kv_heads, head_dim]`` (contiguous); ``block_tables`` ``[num_seqs, max_blocks]`` and
    ``context_lens``/``first_positions`` ``[num_seqs]``, int64. Request ``s`` sees positions
    ``first_positions[s]`` (0 when None) to ``context_lens[s] - 1``.
    """
    lib = library()
    assert lib is not None, "kernels_for() must be checked first"
    assert k_cache.is_contiguous() and v_cache.is_contiguous()
    q = q.contiguous()
    num_seqs, num_heads, head_dim = q.shape
    out = torch.empty_like(q)
    lib.paged_decode_attention(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), block_tables.data_ptr(),
                               context_lens.data_ptr(), _ptr(first_positions), out.data_ptr(), num_seqs, num_heads,
                               k_cache.shape[2], head_dim, k_cache.shape[1], block_tables.shape[1], scale)
    return out
