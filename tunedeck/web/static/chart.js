"use strict";
// A small static line chart on <canvas> (the job form's learning-rate preview): points are [x, y] pairs (y null = gap).
(function () {
  const PAD = { left: 56, right: 12, top: 10, bottom: 26 };

  const niceNumber = window.tunedeck.formatNumber;

  // `canvas` may be null for a series drawn on another chart's axes (see addSeries).
  function LineChart(canvas, options) {
    this.canvas = canvas;
    this.color = (options && options.color) || "#2563eb";
    this.dash = (options && options.dash) || [];
    this.maxPoints = (options && options.maxPoints) || 4000;
    this.points = [];
    this.byX = new Map();
    this.others = [];
    const self = this;
    if (canvas) document.addEventListener("tunedeck:theme", function () { self.draw(); }); // drawn in the theme's colours
  }

  // Draws `series` (a LineChart without a canvas) on this chart's axes, e.g. rejected beside chosen rewards.
  LineChart.prototype.addSeries = function (series) { this.others.push(series); };

  function validPoints(points) { return points.filter(function (p) { return p[1] !== null && isFinite(p[1]); }); }

  LineChart.prototype.setPoints = function (points) {
    this.points = points.slice();
    this.byX = new Map(this.points.map(function (p, i) { return [p[0], i]; }));
    this.draw();
  };

  // Adds a point or replaces the one at the same x (the page and the stream can both bring a step).
  LineChart.prototype.add = function (x, y) {
    if (this.byX.has(x)) {
      this.points[this.byX.get(x)][1] = y;
    } else if (!this.points.length || x > this.points[this.points.length - 1][0]) {
      this.byX.set(x, this.points.length);
      this.points.push([x, y]);
    } else {
      this.points.push([x, y]);
      this.points.sort(function (a, b) { return a[0] - b[0]; });
      this.byX = new Map(this.points.map(function (p, i) { return [p[0], i]; }));
    }
    if (this.points.length > this.maxPoints) {
      // Keep long live runs cheap to draw: halve the older points, keep the newest intact.
      const keep = this.points.length - Math.floor(this.maxPoints / 2);
      const older = this.points.slice(0, keep).filter(function (_, i) { return i % 2 === 0; });
      this.points = older.concat(this.points.slice(keep));
      this.byX = new Map(this.points.map(function (p, i) { return [p[0], i]; }));
    }
  };

  LineChart.prototype.latest = function () {
    for (let i = this.points.length - 1; i >= 0; i--) if (this.points[i][1] !== null) return this.points[i];
    return null;
  };

  LineChart.prototype.draw = function () {
    const canvas = this.canvas;
    if (!canvas) return; // a series drawn by the chart it was added to
    const ratio = window.devicePixelRatio || 1;
    const cssWidth = canvas.clientWidth || canvas.width;
    const cssHeight = canvas.clientHeight || canvas.height;
    if (canvas.width !== Math.round(cssWidth * ratio)) {
      canvas.width = Math.round(cssWidth * ratio);
      canvas.height = Math.round(cssHeight * ratio);
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, cssWidth, cssHeight);
    const lines = [this].concat(this.others);
    const valid = [].concat.apply([], lines.map(function (line) { return validPoints(line.points); }));
    canvas.dataset.points = String(valid.length);
    if (!valid.length) return;
    let xMin = Infinity, xMax = -Infinity, yMin = Infinity, yMax = -Infinity;
    valid.forEach(function (p) {
      if (p[0] < xMin) xMin = p[0]; if (p[0] > xMax) xMax = p[0];
      if (p[1] < yMin) yMin = p[1]; if (p[1] > yMax) yMax = p[1];
    });
    if (xMax === xMin) { xMax = xMin + 1; }
    if (yMax === yMin) { const pad = Math.abs(yMax) * 0.1 || 1; yMin -= pad; yMax += pad; }
    const w = cssWidth - PAD.left - PAD.right, h = cssHeight - PAD.top - PAD.bottom;
    const sx = function (x) { return PAD.left + (x - xMin) / (xMax - xMin) * w; };
    const sy = function (y) { return PAD.top + (1 - (y - yMin) / (yMax - yMin)) * h; };
    // Axes and tick labels.
    const grid = window.tunedeck.themeColor("--line");
    ctx.strokeStyle = window.tunedeck.themeColor("--border"); ctx.lineWidth = 1;
    ctx.fillStyle = window.tunedeck.themeColor("--chart-text");
    ctx.font = "11px system-ui, sans-serif";
    ctx.beginPath(); ctx.moveTo(PAD.left, PAD.top); ctx.lineTo(PAD.left, PAD.top + h); ctx.lineTo(PAD.left + w, PAD.top + h); ctx.stroke();
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    for (let i = 0; i <= 4; i++) {
      const y = yMin + (yMax - yMin) * i / 4;
      ctx.fillText(niceNumber(y), PAD.left - 4, sy(y));
      ctx.strokeStyle = grid; ctx.beginPath(); ctx.moveTo(PAD.left + 1, sy(y)); ctx.lineTo(PAD.left + w, sy(y)); ctx.stroke();
    }
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    for (let i = 0; i <= 4; i++) {
      const x = xMin + (xMax - xMin) * i / 4;
      ctx.fillText(niceNumber(Math.round(x)), sx(x), PAD.top + h + 6);
    }
    lines.forEach(function (line) { drawLine(ctx, line, sx, sy); });
  };

  // One series, broken at gaps (NaN values); its points marked while they are few.
  function drawLine(ctx, line, sx, sy) {
    ctx.strokeStyle = line.color; ctx.lineWidth = 1.5; ctx.setLineDash(line.dash); ctx.beginPath();
    let drawing = false;
    line.points.forEach(function (p) {
      if (p[1] === null || !isFinite(p[1])) { drawing = false; return; }
      if (drawing) ctx.lineTo(sx(p[0]), sy(p[1])); else ctx.moveTo(sx(p[0]), sy(p[1]));
      drawing = true;
    });
    ctx.stroke();
    ctx.setLineDash([]);
    const valid = validPoints(line.points);
    if (valid.length <= 60) {
      ctx.fillStyle = line.color;
      valid.forEach(function (p) { ctx.beginPath(); ctx.arc(sx(p[0]), sy(p[1]), 2.5, 0, 2 * Math.PI); ctx.fill(); });
    }
  }

  window.tunedeck.LineChart = LineChart;
})();
