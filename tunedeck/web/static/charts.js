"use strict";
// Interactive metric charts (job page, compare-runs page), drawn by the vendored uPlot; below them, the plain
// one-series LineChart (the job page's system readings, the job form's learning-rate preview).
// A chart holds its series' points keyed by step; the shared controls choose the x-axis (step, epoch,
// time), the smoothing (an exponential moving average, the raw line faint behind) and a log y scale.
// Drag across a chart to zoom in on the x-axis; double-click it or press "Reset zoom" to see everything.
(function () {
  const td = window.tunedeck;
  // Ten colours told apart in print and by most colour-blind readers, one per compared run.
  const PALETTE = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563", "#65a30d", "#92400e"];
  const HEIGHT = 240;
  // Steps are whole numbers: their axis ticks fall on 1, 2, 5, 10, 20, 50... only.
  const STEP_INCREMENTS = [];
  for (let power = 1; power <= 1e9; power *= 10) STEP_INCREMENTS.push(power, 2 * power, 5 * power);
  const PHONE_HEIGHT = 200;

  function lowerBound(sorted, x) {
    let low = 0, high = sorted.length;
    while (low < high) { const mid = (low + high) >> 1; if (sorted[mid] < x) low = mid + 1; else high = mid; }
    return low;
  }

  function isNumber(value) { return typeof value === "number" && isFinite(value); }

  // Axis tick labels as td.formatNumber writes them (three significant digits), with more digits where
  // neighbouring ticks would otherwise read the same (1743.5 and 1744 both "1740"); null ticks stay blank.
  function tickLabels(values) {
    for (let digits = 3; ; digits++) {
      const labels = values.map(function (value) {
        if (!isNumber(value)) return "";
        if (value === 0) return "0";
        const abs = Math.abs(value);
        if (abs >= 1e5 || abs < 1e-3) return value.toExponential(digits - 2);
        return String(Number(value.toPrecision(digits)));
      });
      const repeated = labels.some(function (label, i) { return i > 0 && label !== "" && label === labels[i - 1]; });
      if (!repeated || digits >= 12) return labels;
    }
  }

  // One series' points by step (value null: a gap). Long live runs stay cheap: past `maxPoints`
  // the older half is thinned to every other point, the newest points kept as they came.
  function PointSet(maxPoints) {
    this.maxPoints = maxPoints || 8000;
    this.steps = [];
    this.values = [];
  }

  PointSet.prototype.set = function (points) {
    const sorted = points.slice().sort(function (a, b) { return a[0] - b[0]; });
    this.steps = sorted.map(function (p) { return p[0]; });
    this.values = sorted.map(function (p) { return isNumber(p[1]) ? p[1] : null; });
  };

  // Adds a point or replaces the one at the same step (the page and the stream can both bring a step).
  PointSet.prototype.add = function (step, value) {
    const y = isNumber(value) ? value : null;
    const n = this.steps.length;
    if (!n || step > this.steps[n - 1]) { this.steps.push(step); this.values.push(y); }
    else {
      const at = lowerBound(this.steps, step);
      if (this.steps[at] === step) this.values[at] = y;
      else { this.steps.splice(at, 0, step); this.values.splice(at, 0, y); }
    }
    if (this.steps.length > this.maxPoints) this.thin();
  };

  PointSet.prototype.thin = function () {
    const keep = this.steps.length - Math.floor(this.maxPoints / 2);
    const steps = [], values = [];
    for (let i = 0; i < keep; i += 2) { steps.push(this.steps[i]); values.push(this.values[i]); }
    this.steps = steps.concat(this.steps.slice(keep));
    this.values = values.concat(this.values.slice(keep));
  };

  PointSet.prototype.count = function () {
    let count = 0;
    for (let i = 0; i < this.values.length; i++) if (this.values[i] !== null) count++;
    return count;
  };

  PointSet.prototype.latest = function () {
    for (let i = this.values.length - 1; i >= 0; i--) if (this.values[i] !== null) return [this.steps[i], this.values[i]];
    return null;
  };

  // The value at `step`, linear between known points, extended beyond them at the rate of the nearest two.
  PointSet.prototype.at = function (step) {
    const steps = this.steps, values = this.values, n = steps.length;
    if (!n) return null;
    if (n === 1) return steps[0] ? values[0] * step / steps[0] : values[0];
    let i = lowerBound(steps, step);
    if (steps[i] === step) return values[i];
    i = Math.min(Math.max(i, 1), n - 1);
    const x0 = steps[i - 1], x1 = steps[i], y0 = values[i - 1], y1 = values[i];
    if (y0 === null || y1 === null || x1 === x0) return y0 === null ? y1 : y0;
    return y0 + (y1 - y0) * (step - x0) / (x1 - x0);
  };

  // How one run's steps map to epochs and to wall-clock time. Epochs come from the points' own `epoch`
  // (metric and eval events carry it), else from the planned steps per epoch; times from the events' times.
  function StepAxis(options) {
    options = options || {};
    this.epochs = new PointSet(options.maxPoints);
    this.times = new PointSet(options.maxPoints);
    this.stepsPerEpoch = options.stepsPerEpoch || null;
    this.relativeTime = Boolean(options.relativeTime); // seconds since the run's first step, to overlay runs
  }

  StepAxis.prototype.has = function (mode) {
    if (mode === "epoch") return this.epochs.count() > 0 || Boolean(this.stepsPerEpoch);
    if (mode === "time") return this.times.count() > 0;
    return true;
  };

  // A function from step to this axis' x in `mode`, or null where the run cannot place the step.
  StepAxis.prototype.converter = function (mode) {
    const self = this;
    if (mode === "epoch") {
      if (this.epochs.count()) return function (step) { return self.epochs.at(step); };
      if (this.stepsPerEpoch) return function (step) { return step / self.stepsPerEpoch; };
      return function () { return null; };
    }
    if (mode === "time") {
      if (!this.times.count()) return function () { return null; };
      const start = this.relativeTime ? this.times.values[0] : 0;
      return function (step) { const t = self.times.at(step); return t === null ? null : t - start; };
    }
    return function (step) { return step; };
  };

  // The shared controls: smoothing, log scale, x-axis, reset zoom (their markup: chart_controls.html).
  function ChartControls(root, onChange, onReset) {
    this.smoothing = root.querySelector("[data-control=smoothing]");
    this.smoothingText = root.querySelector("[data-control=smoothing-value]");
    this.log = root.querySelector("[data-control=log]");
    this.xAxis = root.querySelector("[data-control=x-axis]");
    const self = this;
    this.smoothing.addEventListener("input", function () { self.showSmoothing(); onChange(); });
    this.log.addEventListener("change", onChange);
    this.xAxis.addEventListener("change", onChange);
    root.querySelector("[data-control=reset]").addEventListener("click", onReset);
    this.showSmoothing();
  }

  ChartControls.prototype.showSmoothing = function () { this.smoothingText.textContent = Number(this.smoothing.value).toFixed(2); };

  ChartControls.prototype.state = function () {
    return { smoothing: Math.min(Math.max(Number(this.smoothing.value) || 0, 0), 0.99), log: this.log.checked, mode: this.xAxis.value };
  };

  // Offers an x-axis choice only where some run can place its points on it.
  ChartControls.prototype.offer = function (mode, available) {
    const option = this.xAxis.querySelector('option[value="' + mode + '"]');
    if (!option) return;
    option.disabled = !available;
    if (!available && this.xAxis.value === mode) { this.xAxis.value = "step"; this.xAxis.dispatchEvent(new Event("change")); }
  };

  // One series' x, raw y and smoothed y as the controls ask, sorted by x (steps with no x are left out).
  function seriesXY(series, state) {
    const convert = series.axis.converter(state.mode);
    const steps = series.points.steps, values = series.points.values;
    const xs = [], raw = [], smooth = [];
    let ema = null, sorted = true;
    for (let i = 0; i < steps.length; i++) {
      const x = convert(steps[i]);
      if (!isNumber(x)) continue;
      let y = values[i];
      if (y !== null && state.log && y <= 0) y = null; // a log scale has no place for zero or below
      if (y !== null) ema = ema === null ? y : state.smoothing * ema + (1 - state.smoothing) * y;
      if (xs.length && x < xs[xs.length - 1]) sorted = false;
      xs.push(x); raw.push(y); smooth.push(y === null ? null : ema);
    }
    if (!sorted) {
      const order = xs.map(function (_, i) { return i; }).sort(function (a, b) { return xs[a] - xs[b]; });
      return { xs: order.map(function (i) { return xs[i]; }), raw: order.map(function (i) { return raw[i]; }), smooth: order.map(function (i) { return smooth[i]; }) };
    }
    return { xs: xs, raw: raw, smooth: smooth };
  }

  // uPlot draws series over one shared x array: every series' x values merged. Where a series has no point
  // at an x it holds undefined (its line runs on across); null stays a real gap (a NaN loss is not hidden).
  function aligned(parts) {
    let total = 0;
    parts.forEach(function (part) { total += part.xs.length; });
    const all = new Float64Array(total);
    let at = 0;
    parts.forEach(function (part) { all.set(part.xs, at); at += part.xs.length; });
    all.sort();
    const xs = [];
    for (let i = 0; i < all.length; i++) if (!xs.length || all[i] !== xs[xs.length - 1]) xs.push(all[i]);
    const columns = [];
    parts.forEach(function (part) {
      part.columns.forEach(function (column) {
        const out = new Array(xs.length).fill(undefined);
        let j = 0;
        for (let i = 0; i < part.xs.length; i++) {
          while (xs[j] < part.xs[i]) j++;
          out[j] = column[i];
        }
        columns.push(out);
      });
    });
    return [xs].concat(columns);
  }

  function formatDuration(seconds) {
    const s = Math.round(seconds);
    if (Math.abs(s) < 60) return s + "s";
    if (Math.abs(s) < 3600) return Math.floor(s / 60) + "m" + (s % 60 ? " " + (s % 60) + "s" : "");
    return Math.floor(s / 3600) + "h" + (Math.floor(s % 3600 / 60) ? " " + Math.floor(s % 3600 / 60) + "m" : "");
  }

  function formatX(mode, relativeTime, x) {
    if (!isNumber(x)) return "";
    if (mode === "epoch") return td.t("epoch {epoch}", { epoch: x.toFixed(2) });
    if (mode === "time") return relativeTime ? td.t("{duration} in", { duration: formatDuration(x) }) : new Date(x * 1000).toLocaleString();
    return td.t("step {step}", { step: Math.round(x) });
  }

  // One chart: its figure (chart_figure.html), its series [{key, label, color, dash, points, axis}], the shared controls.
  function MetricChart(figure, series, options) {
    this.figure = figure;
    this.series = series;
    this.optional = Boolean(options && options.optional);
    this.plot = figure.querySelector(".chart-plot");
    this.legend = figure.querySelector(".chart-legend");
    this.empty = figure.querySelector(".chart-empty");
    this.hidden = {}; // series keys the reader switched off in the legend
    this.loaded = false;
    this.uplot = null;
    this.shape = "";
    this.parts = [];
    this.state = null;
    this.buildLegend();
    const self = this;
    this.plot.addEventListener("keydown", function (event) { self.onKey(event); });
  }

  MetricChart.prototype.buildLegend = function () {
    const self = this;
    this.legend.textContent = "";
    const where = document.createElement("li");
    where.className = "legend-x muted";
    this.legend.appendChild(where);
    this.legendValues = this.series.map(function (s) {
      const item = document.createElement("li");
      item.dataset.series = s.key;
      const button = document.createElement("button");
      button.type = "button";
      button.className = "legend-item";
      button.setAttribute("aria-pressed", "true");
      button.title = td.t("Show or hide {series}", { series: s.label });
      const swatch = document.createElement("span");
      swatch.className = "swatch" + (s.dash ? " dashed" : "");
      swatch.style.color = s.color;
      const label = document.createElement("span");
      label.className = "legend-label";
      label.textContent = s.label;
      const value = document.createElement("span");
      value.className = "chart-value";
      button.append(swatch, label, " ", value);
      button.addEventListener("click", function () {
        self.hidden[s.key] = !self.hidden[s.key];
        button.setAttribute("aria-pressed", String(!self.hidden[s.key]));
        self.applyVisibility();
      });
      item.appendChild(button);
      self.legend.appendChild(item);
      return value;
    });
  };

  MetricChart.prototype.hasPoints = function () {
    return this.series.some(function (s) { return s.points.count() > 0; });
  };

  MetricChart.prototype.markLoaded = function () { this.loaded = true; this.markCanvas(); };

  // Test hooks and screen readers: how many points are drawn, whether the series came, whether zoomed.
  MetricChart.prototype.markCanvas = function () {
    if (!this.uplot) return;
    const canvas = this.uplot.root.querySelector("canvas");
    let points = 0;
    this.series.forEach(function (s) { points += s.points.count(); });
    canvas.dataset.points = String(points);
    if (this.loaded) canvas.dataset.loaded = "true";
  };

  // Indices of a series' lines among uPlot's series (raw and smoothed, or the one line without smoothing).
  MetricChart.prototype.linesOf = function (index) {
    const per = this.state.smoothing > 0 ? 2 : 1;
    const first = 1 + index * per;
    return per === 2 ? [first, first + 1] : [first];
  };

  MetricChart.prototype.applyVisibility = function () {
    if (!this.uplot) return;
    const self = this;
    this.series.forEach(function (s, i) {
      self.linesOf(i).forEach(function (line) { self.uplot.setSeries(line, { show: !self.hidden[s.key] }); });
    });
  };

  MetricChart.prototype.width = function () {
    return Math.max(this.plot.clientWidth || this.figure.clientWidth - 16, 200);
  };

  function plotHeight() { return window.innerWidth < 600 ? PHONE_HEIGHT : HEIGHT; }

  // Draws the points as `state` (the controls) asks: a new uPlot when the axes change, else new data.
  MetricChart.prototype.update = function (state) {
    if (this.optional) this.figure.hidden = !this.hasPoints();
    if (this.figure.hidden) return;
    this.empty.hidden = this.hasPoints();
    this.state = state;
    this.parts = this.series.map(function (s) { return seriesXY(s, state); });
    const smoothing = state.smoothing > 0;
    const data = aligned(this.parts.map(function (part) {
      return { xs: part.xs, columns: smoothing ? [part.raw, part.smooth] : [part.raw] };
    }));
    const shape = [smoothing, state.log, state.mode].join("|");
    if (this.uplot && shape === this.shape) {
      const zoomed = this.figure.dataset.zoomed === "true";
      this.uplot.setData(data, !zoomed);
    } else {
      if (this.uplot) this.uplot.destroy();
      this.shape = shape;
      this.uplot = new window.uPlot(this.options(state), data, this.plot);
      this.figure.dataset.zoomed = "false";
      this.applyVisibility();
    }
    this.figure.dataset.xAxis = state.mode;
    this.figure.dataset.yScale = state.log ? "log" : "linear";
    this.markCanvas();
    this.showValues(this.uplot.cursor.idx);
  };

  MetricChart.prototype.options = function (state) {
    const self = this;
    const smoothing = state.smoothing > 0;
    const relative = this.series.some(function (s) { return s.axis.relativeTime; });
    const lines = [{}];
    this.series.forEach(function (s) {
      const dash = s.dash ? [6, 4] : undefined;
      if (smoothing) lines.push({ label: td.t("{series} (raw)", { series: s.label }), stroke: s.color + "44", width: 1, dash: dash, points: { show: false } });
      lines.push({ label: s.label, stroke: s.color, width: 2, dash: dash });
    });
    const wallClock = state.mode === "time" && !relative;
    return {
      width: this.width(),
      height: plotHeight(),
      legend: { show: false },
      cursor: { drag: { x: true, y: false, setScale: true }, points: { size: 6 } },
      scales: { x: { time: wallClock }, y: state.log ? { distr: 3, log: 10 } : { auto: true } },
      series: lines,
      axes: [
        {
          stroke: td.themeColor("--chart-text"),
          grid: { stroke: td.themeColor("--line") },
          incrs: state.mode === "step" ? STEP_INCREMENTS : undefined,
          values: wallClock ? undefined : function (u, splits) {
            return splits.map(function (x) {
              if (state.mode === "time") return formatDuration(x);
              return state.mode === "epoch" ? String(Number(x.toFixed(2))) : String(Math.round(x));
            });
          },
        },
        // A log axis leaves some ticks unlabelled (null) where the labels would crowd.
        { stroke: td.themeColor("--chart-text"), grid: { stroke: td.themeColor("--line") }, size: 56, values: function (u, splits) { return tickLabels(splits); } },
      ],
      hooks: {
        setCursor: [function (u) { self.showValues(u.cursor.idx); }],
        setScale: [function (u, key) { if (key === "x") self.trackZoom(); }],
        setSeries: [function () { self.showValues(self.uplot ? self.uplot.cursor.idx : null); }],
      },
    };
  };

  MetricChart.prototype.trackZoom = function () {
    const u = this.uplot;
    if (!u) return;
    const xs = u.data[0];
    const zoomed = xs.length > 1 && (u.scales.x.min > xs[0] + 1e-9 || u.scales.x.max < xs[xs.length - 1] - 1e-9);
    this.figure.dataset.zoomed = String(zoomed);
  };

  MetricChart.prototype.resetZoom = function () {
    const u = this.uplot;
    if (!u || u.data[0].length < 2) return;
    const xs = u.data[0];
    u.setScale("x", { min: xs[0], max: xs[xs.length - 1] });
    this.figure.dataset.zoomed = "false";
  };

  // The keyboard's zoom: + and - halve and double the range shown, the arrows move it by a tenth, Escape resets.
  MetricChart.prototype.onKey = function (event) {
    const u = this.uplot;
    if (!u || u.data[0].length < 2) return;
    const xs = u.data[0], first = xs[0], last = xs[xs.length - 1];
    const min = u.scales.x.min, max = u.scales.x.max, span = max - min;
    let next = null;
    if (event.key === "+" || event.key === "=") next = [min + span / 4, max - span / 4];
    else if (event.key === "-") next = [min - span / 2, max + span / 2];
    else if (event.key === "ArrowLeft") next = [min - span / 10, max - span / 10];
    else if (event.key === "ArrowRight") next = [min + span / 10, max + span / 10];
    else if (event.key === "Escape") { this.resetZoom(); event.preventDefault(); return; }
    if (!next) return;
    event.preventDefault();
    const width = Math.min(next[1] - next[0], last - first);
    const low = Math.min(Math.max(next[0], first), last - width);
    u.setScale("x", { min: low, max: low + width });
  };

  MetricChart.prototype.resize = function () {
    if (this.uplot && !this.figure.hidden) this.uplot.setSize({ width: this.width(), height: plotHeight() });
  };

  // The legend: each series' value at the cursor (the nearest point of that series), else its latest one.
  MetricChart.prototype.showValues = function (index) {
    if (!this.state) return;
    const self = this;
    const cursorX = this.uplot && index !== null && index !== undefined ? this.uplot.data[0][index] : null;
    const relative = this.series.some(function (s) { return s.axis.relativeTime; });
    this.legend.querySelector(".legend-x").textContent = cursorX === null ? td.t("latest") : formatX(this.state.mode, relative, cursorX);
    this.parts.forEach(function (part, i) {
      let at = -1;
      if (cursorX === null) {
        for (let j = part.raw.length - 1; j >= 0; j--) if (part.raw[j] !== null) { at = j; break; }
      } else if (part.xs.length) {
        const k = Math.min(lowerBound(part.xs, cursorX), part.xs.length - 1);
        at = k > 0 && Math.abs(part.xs[k - 1] - cursorX) < Math.abs(part.xs[k] - cursorX) ? k - 1 : k;
        while (at >= 0 && part.raw[at] === null) at--;
      }
      let text = "";
      if (at >= 0) {
        text = self.state.smoothing > 0
          ? td.t("{value} (raw {raw})", { value: td.formatNumber(part.smooth[at]), raw: td.formatNumber(part.raw[at]) })
          : td.formatNumber(part.raw[at]);
      }
      self.legendValues[i].textContent = text;
    });
  };

  // The charts of a page and their controls: redraws once a frame at most, whatever the stream brings.
  function ChartBoard(controlsRoot) {
    const self = this;
    this.charts = [];
    this.axes = [];
    this.pending = false;
    this.controls = new ChartControls(controlsRoot, function () { self.redraw(); }, function () {
      self.charts.forEach(function (chart) { chart.resetZoom(); });
    });
    // A new theme redraws every chart in its colours (the axes are drawn, not styled).
    document.addEventListener("tunedeck:theme", function () {
      self.charts.forEach(function (chart) { chart.shape = null; });
      self.redraw();
    });
    let width = window.innerWidth;
    window.addEventListener("resize", function () {
      if (window.innerWidth === width) return;
      width = window.innerWidth;
      self.charts.forEach(function (chart) { chart.resize(); });
    });
  }

  ChartBoard.prototype.add = function (chart) { this.charts.push(chart); return chart; };

  ChartBoard.prototype.addAxis = function (axis) { this.axes.push(axis); return axis; };

  // Offers epoch and time on the x-axis once some run can place its points there.
  ChartBoard.prototype.offerAxes = function () {
    const self = this;
    ["epoch", "time"].forEach(function (mode) {
      self.controls.offer(mode, self.axes.some(function (axis) { return axis.has(mode); }));
    });
  };

  ChartBoard.prototype.redraw = function () {
    if (this.pending) return;
    this.pending = true;
    const self = this;
    window.requestAnimationFrame(function () {
      self.pending = false;
      self.offerAxes(); // the stream may have brought the first epoch or time
      const state = self.controls.state();
      self.charts.forEach(function (chart) { chart.update(state); });
    });
  };

  // A plain chart of one series (system readings, the job form's learning-rate preview): points [x, y] set at
  // once or added one by one, drawn by uPlot at its container's size (the CSS gives its height). The container
  // carries data-points (the points drawn) for tests and readers. Options: color, maxPoints, and xStep, the
  // finest x tick interval (1, the default, for steps; 0.1 for seconds kept to tenths).
  const lineCharts = []; // those on the page, redrawn on a new width or theme

  function LineChart(container, options) {
    this.container = container;
    this.color = (options && options.color) || PALETTE[0];
    const xStep = (options && options.xStep) || 1;
    this.xIncrements = [0.1, 0.2, 0.5].concat(STEP_INCREMENTS).filter(function (incr) { return incr >= xStep - 1e-12; });
    this.points = new PointSet(options && options.maxPoints);
    this.uplot = null;
    lineCharts.push(this);
  }

  LineChart.prototype.set = function (points) { this.points.set(points); this.draw(); };

  // Adds a point or replaces the one at the same x; `draw` shows it.
  LineChart.prototype.add = function (x, y) { this.points.add(x, y); };

  LineChart.prototype.count = function () { return this.points.count(); };

  LineChart.prototype.size = function () {
    return { width: Math.max(this.container.clientWidth, 200), height: Math.max(this.container.clientHeight, 120) };
  };

  LineChart.prototype.draw = function () {
    const data = [this.points.steps.slice(), this.points.values.slice()];
    if (this.uplot) this.uplot.setData(data);
    else this.uplot = new window.uPlot(this.options(), data, this.container);
    this.container.dataset.points = String(this.count());
  };

  LineChart.prototype.options = function () {
    const size = this.size();
    const text = td.themeColor("--chart-text"), grid = { stroke: td.themeColor("--line") };
    return {
      width: size.width,
      height: size.height,
      legend: { show: false },
      cursor: { drag: { x: false, y: false }, points: { size: 6 } },
      scales: { x: { time: false }, y: { auto: true } },
      series: [{}, { stroke: this.color, width: 1.5, points: { size: 5, fill: this.color } }],
      axes: [
        { stroke: text, grid: grid, incrs: this.xIncrements, values: function (u, splits) { return tickLabels(splits); } },
        { stroke: text, grid: grid, size: 56, values: function (u, splits) { return tickLabels(splits); } },
      ],
    };
  };

  // Drawn anew (a new theme's colours, a new size); a chart whose container left the page is dropped.
  LineChart.prototype.rebuild = function () {
    if (this.uplot) { this.uplot.destroy(); this.uplot = null; }
    this.draw();
  };

  function redrawLineCharts(resized) {
    for (let i = lineCharts.length - 1; i >= 0; i--) {
      const chart = lineCharts[i];
      if (!chart.container.isConnected) { if (chart.uplot) chart.uplot.destroy(); lineCharts.splice(i, 1); }
      else if (resized && chart.uplot) chart.uplot.setSize(chart.size());
      else chart.rebuild();
    }
  }
  document.addEventListener("tunedeck:theme", function () { redrawLineCharts(false); });
  window.addEventListener("resize", function () { redrawLineCharts(true); });

  td.charts = { PALETTE: PALETTE, PointSet: PointSet, StepAxis: StepAxis, MetricChart: MetricChart, ChartBoard: ChartBoard,
                LineChart: LineChart };
})();
