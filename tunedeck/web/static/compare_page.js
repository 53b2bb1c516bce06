"use strict";
// The compare-runs page: one chart per metric, one line per job, with the job page's controls.
// Each job's series comes from the metrics API, downsampled on the server; time is counted from each
// job's first logged step so that runs started at different hours overlay.
(function () {
  const td = window.tunedeck;
  const charts = td.charts;
  const data = td.jsonScript("compare-data");
  const controls = document.getElementById("chart-controls");
  if (!controls) { document.getElementById("compare-data").dataset.ready = "true"; return; }
  const board = new charts.ChartBoard(controls);
  const REQUESTS_AT_ONCE = 6;

  const axes = data.jobs.map(function (job) {
    return board.addAxis(new charts.StepAxis({ stepsPerEpoch: job.steps_per_epoch, relativeTime: true }));
  });
  const loads = []; // [job index, series name, the PointSet it fills]
  const entries = data.metrics.map(function (name, index) {
    const series = data.jobs.map(function (job, i) {
      const points = new charts.PointSet(data.max_points * 2);
      loads.push([i, name, points]);
      return { key: job.id, label: job.name, color: charts.PALETTE[i % charts.PALETTE.length], dash: false, points: points, axis: axes[i] };
    });
    return { chart: board.add(new charts.MetricChart(document.getElementById("chart-metric-" + (index + 1)), series)), waiting: series.length };
  });
  data.jobs.forEach(function (job, i) {
    loads.push([i, "epoch", axes[i].epochs]);
  });

  function jobPath(job) { return "/api/v1/jobs/" + encodeURIComponent(job.id); }

  async function load(entry) {
    const job = data.jobs[entry[0]];
    const answer = await td.api("GET", jobPath(job) + "/metrics/" + encodeURIComponent(entry[1]) + "?points=" + data.max_points);
    if (answer.ok && answer.data && Array.isArray(answer.data.points)) {
      entry[2].set(answer.data.points.map(function (p) { return [p.step, p.value]; }));
    }
    const index = data.metrics.indexOf(entry[1]);
    if (index !== -1 && --entries[index].waiting === 0) entries[index].chart.markLoaded();
    board.redraw();
  }

  async function loadTimes(job, i) {
    const answer = await td.api("GET", "/jobs/" + encodeURIComponent(job.id) + "/step-times");
    if (answer.ok && answer.data && Array.isArray(answer.data.points)) axes[i].times.set(answer.data.points);
  }

  // A few requests at a time: ten jobs by a dozen metrics would otherwise queue a hundred at once.
  async function worker(queue) {
    while (queue.length) await queue.shift()();
  }

  const queue = loads.map(function (entry) { return function () { return load(entry); }; })
    .concat(data.jobs.map(function (job, i) { return function () { return loadTimes(job, i); }; }));
  const workers = [];
  for (let i = 0; i < REQUESTS_AT_ONCE; i++) workers.push(worker(queue));
  board.redraw();
  Promise.all(workers).then(function () {
    board.redraw();
    document.getElementById("compare-data").dataset.ready = "true";
  });
})();
