"""The NumPy baselines' timing (bench/*_numpy.py import it from their own directory)."""
import statistics
import time


def median_ms(fn, reps):
    """Median wall-clock milliseconds of fn() over reps calls, after one warm-up call."""
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)
