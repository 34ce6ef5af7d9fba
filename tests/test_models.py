import numpy as np
import pytest

from labkit import models, specs
from labkit.units import GB


def test_fit_recovers_alpha_beta_from_noisy_synthetic_data():
    rng = np.random.default_rng(0)
    alpha, beta_GBps = 5e-6, 24.0
    n = np.array([2**k for k in range(2, 31)], dtype=float)
    t = (alpha + n / (beta_GBps * GB)) * (1 + rng.normal(0, 0.03, n.size))  # 3% multiplicative noise
    fit = models.fit_alpha_beta(n, t)
    assert fit.latency_s == pytest.approx(alpha, rel=0.1)
    assert fit.bandwidth_GBps == pytest.approx(beta_GBps, rel=0.05)
    assert fit.n_half_bytes == pytest.approx(alpha * beta_GBps * GB, rel=0.15)
    assert np.max(np.abs(fit.residuals)) < 0.15
    assert fit.bound(1024) == "latency-bound" and fit.bound(1 << 30) == "bandwidth-bound"
    # at n½ the modelled bandwidth is half the asymptote
    assert fit.predict_bandwidth_GBps(fit.n_half_bytes) == pytest.approx(fit.bandwidth_GBps / 2)


def test_fit_rejects_nonsense():
    with pytest.raises(ValueError):
        models.fit_alpha_beta([1, 1], [1e-6, 1e-6])
    with pytest.raises(ValueError):
        models.fit_alpha_beta([1, 2], [1e-6, -1])
    with pytest.raises(ValueError):
        models.fit_alpha_beta([1, 2, 3], [1e-6, 2e-6])


def test_ring_allreduce_7b_example_from_design():
    # 7B fp16 gradients = 14 GB over 8 GPUs at 32 GB/s per direction: 765.6 ms, not 918.8 ms.
    t = models.allreduce_time(14e9, 8, 32.0)
    assert t == pytest.approx(0.765625)
    # NVLink 4: 900 GB/s is bidirectional; a ring sees 450 per direction: 2·7/8·14 GB / 450 GB/s = 54.44 ms, not 27.
    nvl = specs.spec("NVLink 4").per_direction_GBps()
    assert nvl == 450.0
    assert models.allreduce_time(14e9, 8, nvl) == pytest.approx(2 * 7 / 8 * 14 / 450)  # 0.05444 s


def test_collective_models_textbook_cases():
    S, b, a = 1e9, 100.0, 1e-5
    assert models.allreduce_time(S, 1, b, a) == 0.0
    assert models.allreduce_time(S, 2, b, a, "ring") == pytest.approx(2 * a + S / (b * GB))
    assert models.allreduce_time(S, 8, b, a, "naive") == pytest.approx(14 * (a + S / (b * GB)))
    assert models.allreduce_time(S, 8, b, a, "recursive_doubling") == pytest.approx(3 * (a + S / (b * GB)))
    # not a power of two: the ranks beyond 4 hand their buffer in and get the result back, two rounds more
    assert models.allreduce_time(S, 6, b, a, "recursive_doubling") == pytest.approx(4 * (a + S / (b * GB)))
    # a tree still moves ~2S per GPU; only its latency term grows as log N
    assert models.allreduce_time(S, 8, b, 0.0, "tree") == pytest.approx(2 * S / (b * GB))
    # hierarchical with one group (or one rank per group) is the flat ring
    flat = models.allreduce_time(S, 8, b, a, "ring")
    assert models.allreduce_time(
        S, 8, b, a, "hierarchical", gpus_per_node=8, inter_bandwidth_GBps=1.0
    ) == pytest.approx(flat)
    assert models.allreduce_time(
        S, 8, 1e9, 0.0, "hierarchical", gpus_per_node=1, inter_bandwidth_GBps=b
    ) == pytest.approx(models.allreduce_time(S, 8, b, 0.0, "ring"), rel=1e-6)
    with pytest.raises(ValueError):
        models.allreduce_time(S, 8, b, algorithm="hierarchical", gpus_per_node=3, inter_bandwidth_GBps=1)
    with pytest.raises(ValueError):
        models.allreduce_time(S, 8, b, algorithm="butterfly")
    assert models.allreduce_bytes_per_rank(S, 4) == pytest.approx(1.5e9)
