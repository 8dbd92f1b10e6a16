"""``benchmarks/newshape_cpu.py``'s shapes: each drawn once a process, and a clear stop (not an endless draw) once
none is left; its default run fits in the shapes there are."""
import pathlib
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    import benchmarks.newshape_cpu as bench
    return bench


def test_shapes_are_never_given_twice_and_stop_when_none_is_left(bench):
    shapes = bench.Shapes(0)
    shapes.seen = {(1, c, h, w) for c in range(1, 9) for h in range(4, 40) for w in range(4, 40)}
    shapes.seen.discard((1, 3, 5, 7))
    assert shapes.new() == (1, 3, 5, 7)
    with pytest.raises(SystemExit, match="no \\(1, C, H, W\\) shape left"):
        shapes.new()


def test_the_default_run_fits_in_the_shapes_there_are(bench, monkeypatch):
    import argparse
    real, seen = argparse.ArgumentParser.parse_args, {}

    class Stop(Exception):
        pass

    def parse(self, argv=None, namespace=None):
        seen.update(vars(real(self, [])))
        raise Stop

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse)
    with pytest.raises(Stop):
        bench.main([])
    assert len(bench.rows()) * (1 + seen["calls"] * seen["rounds"]) <= 8 * 36 * 36
