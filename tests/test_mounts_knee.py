"""The knee detector on series with known answers: step drops, linear ramps, exponential decays,
flat noise, rising series, and fio logs written every 500 ms. Seeded noise; every trial must pass
(the old detector was wrong in 20/20 ramp and 10/10 decay trials)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from replmon.mounts import knee as k

B, S, SIGMA = 600e6, 150e6, 20e6  # bytes/s: a persistent-50 burst and sustained level, noise 20 MB/s
LINE = B * (1 - k.MIN_DROP)


def series(level: np.ndarray, seed: int, sigma: float = SIGMA) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    return [float(t) for t in range(len(level))], [float(v) for v in level + rng.normal(0, sigma, len(level))]


def test_noise_sigma_is_the_documented_estimator() -> None:
    """median(|dx|) / (0.6745 sqrt 2) recovers the noise's standard deviation, and a few steps do not move it."""
    for seed in range(5):
        _, v = series(np.full(3000, 100.0), seed, sigma=10.0)
        assert k.noise_sigma(v) == pytest.approx(10.0, rel=0.06)
        _, stepped = series(np.where(np.arange(3000) < 1500, 1000.0, 100.0), seed, sigma=10.0)
        assert k.noise_sigma(stepped) == pytest.approx(10.0, rel=0.06)


@pytest.mark.parametrize("seed", range(8))
def test_step_drop(seed: int) -> None:
    at = 60 + 15 * seed
    t, v = series(np.where(np.arange(at + 240) < at, B, S), seed)
    got = k.find_knee(t, v)
    assert got is not None
    assert got.burst == pytest.approx(B, rel=0.02) and got.sustained == pytest.approx(S, rel=0.05)  # 3 standard errors of a median of 120 samples
    assert got.at_s == got.decline_start_s == got.decline_end_s == pytest.approx(at, abs=1)
    assert got.burst_duration_s == got.decline_start_s and got.segments == 2


@pytest.mark.parametrize("seed", range(20))
def test_linear_ramp_reports_its_start_the_crossing_and_its_end(seed: int) -> None:
    """Plateau 0-120 s, a linear fall to S over 120-240 s, then S: the crossing of 450 MB/s is at
    120 + 120 * (B - LINE) / (B - S) = 160 s. The ramp's first and last seconds are within noise
    of the plateaus (3 sigma / slope = 16 s), so its ends are found to that."""
    t_ = np.arange(480.0)
    level = np.where(t_ < 120, B, np.where(t_ < 240, B - (B - S) * (t_ - 120) / 120, S))
    got = k.find_knee(*series(level, seed))
    assert got is not None
    slope = (B - S) / 120
    assert got.burst == pytest.approx(B, rel=0.02) and got.sustained == pytest.approx(S, rel=0.05)  # 3 standard errors of a median of 120 samples
    assert got.at_s == pytest.approx(120 + (B - LINE) / slope, abs=6)
    assert 115 <= got.decline_start_s <= 120 + 2 * 3 * SIGMA / slope
    assert 240 - 3 * 3 * SIGMA / slope <= got.decline_end_s <= 245
    assert got.decline_start_s < got.at_s < got.decline_end_s


@pytest.mark.parametrize("seed", range(10))
def test_exponential_decay(seed: int) -> None:
    """Plateau to 100 s, then S + (B - S) e^-(t-100)/30: crosses 450 MB/s at 100 + 30 ln(450/300) =
    112.2 s; the decline ends where what is left of the decay is lost in the noise: between 6 and 1
    noise sigmas above S, 100 + 30 ln(450/120) = 139.7 s and 100 + 30 ln(450/20) = 193.4 s."""
    tau = 30.0
    t_ = np.arange(500.0)
    level = np.where(t_ < 100, B, S + (B - S) * np.exp(-(t_ - 100) / tau))
    got = k.find_knee(*series(level, seed))
    assert got is not None
    assert got.burst == pytest.approx(B, rel=0.02) and got.sustained == pytest.approx(S, rel=0.05)
    assert got.at_s == pytest.approx(100 + tau * math.log((B - S) / (LINE - S)), abs=4)
    assert 98 <= got.decline_start_s <= 112
    assert 100 + tau * math.log((B - S) / (6 * SIGMA)) - 1 <= got.decline_end_s <= 100 + tau * math.log((B - S) / SIGMA)


@pytest.mark.parametrize("seed", range(10))
def test_flat_and_rising_series_have_no_knee(seed: int) -> None:
    flat = np.full(600, B)
    assert k.find_knee(*series(flat, seed, sigma=3 * SIGMA)) is None
    rising = np.where(np.arange(300) < 30, S, B)  # a cache's slow first pass, then fast
    assert k.find_knee(*series(rising, seed)) is None
    shallow = np.where(np.arange(300) < 100, B, 0.8 * B)  # 20 %: below the 25 % minimum drop
    assert k.find_knee(*series(shallow, seed)) is None


def _log(rates: list[float], every_ms: int, start_ms: int = 1_790_000_000_000, direction: int = 1) -> str:
    """A fio bandwidth log: one line per sample, KiB/s."""
    return "".join(f"{start_ms + i * every_ms}, {r / 1024:.0f}, {direction}, 1048576, 0\n" for i, r in enumerate(rates))


def test_500ms_logs_are_averaged_within_a_log_and_summed_across_logs() -> None:
    """Two jobs logging every 500 ms at 300 MB/s for 60 s then 75 MB/s: 600 then 150 MB/s in all
    (the old reading added the two samples of each second: 1,200 MB/s)."""
    job = [B / 2] * 120 + [S / 2] * 120
    samples = k.read_bw_log(_log(job, 500), "j0_bw.1.log") + k.read_bw_log(_log(job, 500), "j0_bw.2.log")
    t, v = k.per_second(samples, "write")
    assert len(v) == 120 and v[0] == pytest.approx(B, rel=1e-3) and v[-1] == pytest.approx(S, rel=1e-3)
    got = k.find_knee(t, v)
    assert got is not None and got.at_s == pytest.approx(60, abs=1)
    assert got.burst == pytest.approx(B, rel=1e-3) and got.sustained == pytest.approx(S, rel=1e-3)
    assert k.by_direction(samples)["write"]["knee"]["burst_duration_s"] == pytest.approx(60, abs=1)


def test_seconds_in_which_no_job_logged_moved_nothing() -> None:
    """fio writes a log entry for a window only when the job moved bytes in it: jobs blocked behind
    a throttled mount log nothing. Those seconds are zeros in the sum, not holes that would splice
    the burst onto the level after the silence (the lab's burst-write on the capped mount has
    silent seconds right where the cap bites)."""
    t0 = 1_790_000_000_000
    log = "".join(f"{t0 + i * 1000 + 900}, {100 * 1024}, 1, 1048576, 0\n" for i in [*range(10), *range(15, 25)])
    t, v = k.per_second(k.read_bw_log(log, "a_bw.1.log"), "write")
    assert t == [float(i) for i in range(25)] and v[10:15] == [0.0] * 5 and v[9] == v[15] == 100 * 2**20


def test_a_fall_the_search_leaves_in_one_segment_is_no_knee_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A noisy decline the change-point search keeps as one segment: its later half is lower, but
    there is no plateau to fall from; the detector says no knee (it raised IndexError before)."""
    monkeypatch.setattr(k, "segments", lambda values, sigma: [(0, len(values))])
    t = [float(i) for i in range(30)]
    assert k.find_knee(t, [100.0 - 3 * i for i in range(30)]) is None


def test_a_two_hour_log_at_one_second() -> None:
    """7,200 samples (a full-scale burst run) through the same search, boundaries to the second."""
    t, v = series(np.where(np.arange(7200) < 1800, B, S), 1)
    got = k.find_knee(t, v)
    assert got is not None and got.at_s == got.decline_end_s == pytest.approx(1800, abs=1)


def test_any_shape_gives_a_knee_or_none_never_an_error() -> None:
    """Random piecewise series (plateaus, steps, ramps, drops in the last few samples, spikes):
    the detector answers with times inside the series, in order, or no knee."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(6, 400))
        level = np.full(n, B)
        for _ in range(int(rng.integers(0, 4))):
            at = int(rng.integers(0, n))
            level[at:] = level[at:] * rng.uniform(0.1, 1.3)
        if rng.random() < 0.3:  # a fall inside the last few samples
            level[-3:] = S
        t, v = series(level, int(rng.integers(0, 10**6)), sigma=float(rng.uniform(0, 0.1)) * B)
        got = k.find_knee(t, v)
        if got is not None:
            assert 0 <= got.decline_start_s <= got.decline_end_s <= t[-1] and 0 <= got.at_s <= t[-1]
            assert got.sustained <= got.burst * (1 - k.MIN_DROP)


def test_a_log_with_a_write_every_few_seconds_is_read_at_the_resolution_that_resolves_it() -> None:
    """Jobs that complete a write only when a whole multipart upload does log one entry every few
    seconds; per second the sum is mostly zeros and spikes (no level to segment). The detector
    reads it in 3 s bins, where every bin saw I/O, and finds the cap where it is."""
    t0 = 1_790_000_000_000
    log = "".join(f"{t0 + i * 1000}, {(300 if i < 60 else 60) * 3 * 1024}, 1, 1048576, 0\n" for i in range(1, 120, 3))
    samples = k.read_bw_log(log, "ior-write_bw.1.log")
    _, v = k.per_second(samples, "write")
    assert sum(1 for x in v if x == 0) > len(v) / 2 and k.resolution(v) == 3
    got = k.by_direction(samples)["write"]
    assert got["resolution_s"] == 3 and got["knee"] is not None
    assert 57 <= got["knee"]["at_s"] <= 63 and got["knee"]["burst"] == pytest.approx(300 * 2**20) and got["knee"]["sustained"] == pytest.approx(60 * 2**20)
    assert k.table_row("write", got)["resolution s"] == 3


@pytest.mark.parametrize("seed", range(8))
def test_a_pause_in_the_burst_is_not_the_fall(seed: int) -> None:
    """The client paused for 4 s in the middle of its burst (every upload waiting for its answer at
    once: the lab's meter saw 1.5, 0, 0, 3.6 MiB/s at 20 MiB/s) and then wrote at the burst rate
    again until the cap fell: the knee is the fall for good, not the pause, and the plateau runs
    to it."""
    at, pause = 45 + 5 * seed, 20 + 2 * seed
    level = np.where(np.arange(at + 120) < at, B, S)
    level[pause:pause + 4] = [0.075 * B, 0.0, 0.0, 0.18 * B]
    t, v = series(level, seed)
    got = k.find_knee(t, v)
    assert got is not None and got.burst == pytest.approx(B, rel=0.02) and got.sustained == pytest.approx(S, rel=0.05)
    assert got.at_s == pytest.approx(at, abs=1) and got.decline_start_s == pytest.approx(at, abs=1)

