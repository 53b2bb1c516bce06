"""Browser time of the dashboard's interactive charts (static/charts.js on the vendored uPlot) over long series.

    python benchmarks/chart_points.py [--points 100000] [--repeats 5]

One chart with two series of `--points` points each (a training loss at every step and an
evaluation loss at every step, offset by half a step so that the two share no x value and the
merged x-axis holds twice as many), in headless Chromium, timed in the page:

1. a full draw as the page's controls change the chart's shape (smoothing on, log scale, x-axis
   by time): the points smoothed, merged onto one x-axis, and a new uPlot drawn;
2. a redraw with new data on the same axes (a smoothing change, or points the stream appended);
3. a cursor move: uPlot's crosshair and the legend's values at the cursor.

Each figure runs from the call until the next animation frame has been painted, so it includes
uPlot's deferred draw. The server sends a page at most 2,000 points per series (LTTB) and a live
page holds at most twice that; `--points 100000` is the stress case. Target: median under 500 ms
for a full draw and under 50 ms for a cursor move. Results go to benchmarks/results/chart_points.json
+ .png via the harness.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import BenchmarkResult, Measurement, write_result

STATIC = Path(__file__).resolve().parents[1] / "tunedeck" / "web" / "static"
CHROMIUM = "/usr/bin/chromium"
PAGE = """<!doctype html><html><head><meta charset="utf-8">
<link rel="stylesheet" href="uPlot.min.css"><script src="uPlot.iife.min.js"></script>
<script src="common.js"></script><script src="charts.js"></script></head><body>
<div id="chart-controls">
  <input type="range" data-control="smoothing" min="0" max="0.99" step="0.01" value="0.6">
  <output data-control="smoothing-value"></output><input type="checkbox" data-control="log">
  <select data-control="x-axis"><option value="step">step</option><option value="epoch">epoch</option>
  <option value="time">time</option></select><button type="button" data-control="reset">Reset zoom</button>
</div>
<div style="width: 640px"><figure id="chart"><figcaption>Loss</figcaption><div class="chart-plot"></div>
<ul class="chart-legend"></ul><p class="chart-empty"></p></figure></div>
<script>
const charts = window.tunedeck.charts;
const board = new charts.ChartBoard(document.getElementById("chart-controls"));
const axis = board.addAxis(new charts.StepAxis({}));
function series(count, offset) {
  const points = [];
  for (let i = 0; i < count; i++) points.push([2 * i + offset, 3 / Math.sqrt(i + 1) + 0.1 * Math.sin(i)]);
  const set = new charts.PointSet(2 * count);
  set.set(points);
  return set;
}
window.setUp = function (count) {
  const times = [];
  for (let i = 0; i < 2 * count; i += 50) times.push([i, 1.7e9 + i * 0.25]);
  axis.times.set(times);
  window.chart = board.add(new charts.MetricChart(document.getElementById("chart"), [
    { key: "loss", label: "training loss", color: "#2563eb", points: series(count, 0), axis: axis },
    { key: "eval_loss", label: "evaluation loss", color: "#dc2626", dash: true, points: series(count, 1), axis: axis },
  ]));
};
function painted() {
  return new Promise(function (done) { requestAnimationFrame(function () { setTimeout(done, 0); }); });
}
window.timeUpdate = async function (state) {
  const start = performance.now();
  window.chart.update(state);
  await painted();
  return performance.now() - start;
};
window.timeCursor = async function (fraction) {
  const u = window.chart.uplot;
  const start = performance.now();
  u.setCursor({ left: u.bbox.width / devicePixelRatio * fraction, top: 40 });
  await painted();
  return performance.now() - start;
};
</script></body></html>
"""
SHAPES = (
    {"smoothing": 0.6, "log": False, "mode": "step"},
    {"smoothing": 0.6, "log": True, "mode": "step"},
    {"smoothing": 0.6, "log": False, "mode": "time"},
    {"smoothing": 0.0, "log": False, "mode": "step"},
)


def main() -> int:
    """Run the benchmark and write its result."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=100_000, help="points per series")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    full = Measurement("full_draw_ms", "full draw (new axes)", "ms", higher_is_better=False, target=500.0)
    redraw = Measurement("redraw_ms", "redraw (new data, same axes)", "ms", higher_is_better=False)
    cursor = Measurement("cursor_ms", "cursor move", "ms", higher_is_better=False, target=50.0)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name in ("common.js", "charts.js", "vendor/uplot/uPlot.iife.min.js", "vendor/uplot/uPlot.min.css"):
            shutil.copy(STATIC / name, root / Path(name).name)
        (root / "chart.html").write_text(PAGE, encoding="utf-8")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto((root / "chart.html").as_uri())
            page.evaluate("count => window.setUp(count)", args.points)
            page.evaluate("state => window.timeUpdate(state)", SHAPES[-1])  # warm-up
            for repetition in range(args.repeats):
                for shape in SHAPES:
                    full.values.append(page.evaluate("state => window.timeUpdate(state)", shape))
                smoother = {**SHAPES[-1], "smoothing": 0.5 + repetition / (10 * args.repeats)}
                page.evaluate("state => window.timeUpdate(state)", smoother)
                redraw.values.append(page.evaluate("state => window.timeUpdate(state)", {**smoother, "smoothing": 0.9}))
                for step in range(5):
                    cursor.values.append(page.evaluate("f => window.timeCursor(f)", 0.1 + step * 0.2))
            drawn = page.evaluate("Number(document.querySelector('#chart canvas').dataset.points)")
            browser.close()
    result = BenchmarkResult(
        name="chart_points",
        description="Interactive charts in Chromium: draw, redraw and cursor times over two long series.",
        parameters={"points_per_series": args.points, "repeats": args.repeats, "shapes": list(SHAPES)},
        measurements=[full, redraw, cursor],
        checks={"points_drawn": drawn, "expected": 2 * args.points, "page_errors": errors},
        notes=["Each figure includes waiting for the next painted frame (up to one frame, about 16 ms)."],
        packages=("playwright",),
    )
    write_result(result)
    return 0 if drawn == 2 * args.points and not errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
