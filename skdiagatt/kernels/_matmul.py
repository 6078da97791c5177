"""Matrix products at float32 precision on every backend: every product of the kernels goes through here.

XLA's default precision for a float32 product depends on the backend.  CPUs
compute it in float32; NVIDIA GPUs since Ampere compute it in TensorFloat-32
(10-bit mantissa, relative errors near 5e-4).  Measured on an H200 at the
default (``benchmarks/bench_devices.py``): the predictions of one fitted
``DiagAttRegressor`` differed between the GPU and the CPU by 4.4e-3 of their
standard deviation, and 36 tests that hold kernels to float64 references
failed.  Asking for ``Precision.HIGHEST`` keeps float32 arithmetic on every
backend; on CPU it changes no bit.  The precision is a parameter of each
product, so it also holds for the products that differentiation derives from
them, whatever precision the caller's context sets.
"""

import jax
import jax.numpy as jnp

PRECISION = jax.lax.Precision.HIGHEST


def einsum(subscripts, *operands):
    """:func:`jax.numpy.einsum` at float32 precision."""
    return jnp.einsum(subscripts, *operands, precision=PRECISION)


def matmul(a, b):
    """``a @ b`` at float32 precision."""
    return jnp.matmul(a, b, precision=PRECISION)
