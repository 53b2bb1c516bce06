"use strict";
// The job page: interactive charts (charts.js) from the server's downsampled series, then live from the event stream;
// state, progress, time left and the action buttons follow the job without a reload, and when the
// job ends the parts that depend on its outcome (final model, playground, environment) are fetched.
(function () {
  const td = window.tunedeck;
  const data = td.jsonScript("job-data");
  const jobPath = "/api/v1/jobs/" + encodeURIComponent(data.job_id);
  const pagePath = "/jobs/" + encodeURIComponent(data.job_id);
  const COLORS = { loss: "#2563eb", eval_loss: "#dc2626", learning_rate: "#7c3aed", grad_norm: "#059669", tokens_per_second: "#d97706" };
  // A preference chart's series in order: train lines solid, evaluation lines dashed in the same colours.
  const SERIES_COLORS = ["#059669", "#dc2626", "#059669", "#dc2626"];
  const PAIR_COLORS = ["#2563eb", "#2563eb"];
  const LOG_LINES = 200;
  const POLL_MS = 2000;
  // A job's and a checkpoint's states in the page's words (the state itself stays the badge's class).
  const STATE_WORDS = {
    queued: td.t("queued"), running: td.t("running"), pausing: td.t("pausing"), paused: td.t("paused"),
    succeeded: td.t("succeeded"), failed: td.t("failed"), cancelled: td.t("cancelled"),
    written: td.t("written"), committed: td.t("committed"),
  };
  function stateWord(value) { return Object.prototype.hasOwnProperty.call(STATE_WORDS, value) ? STATE_WORDS[value] : value; }
  const charts = td.charts;
  const points = {}; // series name -> its PointSet
  const byChart = []; // each chart: the MetricChart and its series names
  let totalSteps = data.total_steps;
  let state = data.state;
  let actions = data.actions; // what the job allows now (a job refused by its checks is not offered Resume)
  // Steps placed in epochs (the points' own epoch, else the planned steps per epoch) and in wall-clock time.
  const board = new charts.ChartBoard(document.getElementById("chart-controls"));
  const axis = board.addAxis(new charts.StepAxis({ stepsPerEpoch: data.steps_per_epoch, maxPoints: data.max_points * 2 }));

  data.charts.forEach(function (spec) {
    const colors = spec.series.length === 4 ? SERIES_COLORS : PAIR_COLORS;
    const series = spec.series.map(function (pair, i) {
      const name = pair[0];
      points[name] = new charts.PointSet(data.max_points * 2);
      return {
        key: name,
        label: pair[1],
        color: COLORS[name] || colors[i % colors.length],
        dash: name.indexOf("eval_") === 0,
        points: points[name],
        axis: axis,
      };
    });
    const chart = board.add(new charts.MetricChart(document.getElementById("chart-" + spec.id), series, { optional: spec.optional }));
    byChart.push({ chart: chart, names: spec.series.map(function (pair) { return pair[0]; }) });
  });

  // One series as the server downsampled it ([[step, value]]); points the stream brought meanwhile are kept.
  async function fetchSeries(name) {
    const answer = await td.api("GET", jobPath + "/metrics/" + encodeURIComponent(name) + "?points=" + data.max_points);
    if (!answer.ok || !answer.data || !Array.isArray(answer.data.points)) return null;
    return answer.data.points.map(function (p) { return [p.step, p.value]; });
  }

  function merge(set, loaded) {
    const streamed = set.steps.map(function (step, i) { return [step, set.values[i]]; });
    set.set(loaded);
    streamed.forEach(function (p) { set.add(p[0], p[1]); });
  }

  async function loadSeries(name) {
    const loaded = await fetchSeries(name);
    if (loaded) merge(points[name], loaded);
    byChart.forEach(function (entry) {
      if (entry.names.indexOf(name) === -1) return;
      entry.loaded = (entry.loaded || 0) + 1;
      if (entry.loaded === entry.names.length) entry.chart.markLoaded();
    });
    board.redraw();
  }

  // The epochs of the steps (metric events carry them) and when each step was logged, for the x-axis choice.
  async function loadAxis() {
    const epochs = await fetchSeries("epoch");
    if (epochs) merge(axis.epochs, epochs);
    const times = await td.api("GET", pagePath + "/step-times");
    if (times.ok && times.data && Array.isArray(times.data.points)) merge(axis.times, times.data.points);
    board.redraw();
  }

  // Every charted series the event carries (metric events the training ones, eval events the eval_ ones).
  function addPoints(payload, when) {
    if (typeof payload.step !== "number") return;
    Object.keys(points).forEach(function (name) {
      if (!(name in payload)) return;
      points[name].add(payload.step, payload[name]);
    });
    if (typeof payload.epoch === "number") axis.epochs.add(payload.step, payload.epoch);
    // Event times are UTC; one stored without its zone is read as UTC too, not as the browser's local time.
    const stamp = when ? String(when) : "";
    const seconds = stamp ? Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(stamp) ? stamp : stamp + "Z") / 1000 : NaN;
    if (isFinite(seconds)) axis.times.add(payload.step, seconds);
    board.redraw();
  }

  function setProgress(step) {
    const bar = document.getElementById("job-progress");
    if (totalSteps) { bar.max = totalSteps; bar.value = Math.min(step, totalSteps); }
    document.getElementById("job-progress-text").textContent =
      totalSteps ? td.t("{step}/{total} steps", { step: step, total: totalSteps }) : td.t("step {step}", { step: step });
  }

  function appendTimeline(kind, payload, when) {
    const item = document.createElement("li");
    const time = document.createElement("time");
    time.textContent = when ? String(when).replace("T", " ").slice(0, 19) + " UTC" : "";
    item.appendChild(time);
    const parts = [kind, payload.name, payload.status, payload.kind].filter(Boolean);
    if (typeof payload.step === "number") parts.push(td.t("at step {step}", { step: payload.step }));
    // A resume carries its own words ("resumed from step 4"), as the page renders them.
    const text = kind === "resume" ? payload.message || td.t("resumed") : parts.join(" ");
    item.appendChild(document.createTextNode(" " + text));
    document.getElementById("timeline").appendChild(item);
  }

  function appendLog(payload, when) {
    const pre = document.getElementById("log-tail");
    const line = (when ? String(when).replace("T", " ").slice(0, 19) + " UTC " : "") + (payload.level || "info") + " " + (payload.message || "") + "\n";
    pre.textContent += line;
    const lines = pre.textContent.split("\n");
    if (lines.length > LOG_LINES + 1) pre.textContent = lines.slice(-LOG_LINES - 1).join("\n");
    pre.scrollTop = pre.scrollHeight;
  }

  function showDiagnosis(payload) {
    const panel = document.getElementById("diagnosis");
    panel.hidden = false;
    const article = document.createElement("article");
    const title = document.createElement("h3");
    const kind = payload.kind ? payload.kind.replace(/_/g, " ") : td.t("problem");
    title.textContent = typeof payload.step === "number" ? td.t("{title} (step {step})", { title: kind, step: payload.step }) : kind;
    article.appendChild(title);
    if (payload.message) { const p = document.createElement("p"); p.textContent = payload.message; article.appendChild(p); }
    if (Array.isArray(payload.advice)) {
      const list = document.createElement("ul");
      payload.advice.forEach(function (a) { const li = document.createElement("li"); li.textContent = a; list.appendChild(li); });
      article.appendChild(list);
    }
    panel.appendChild(article);
  }

  function checkpointRow(c, resumable, newest) {
    const row = document.createElement("tr");
    row.dataset.step = String(c.step);
    row.id = "checkpoint-" + c.step;  // the best checkpoint's link above points here
    const cells = [String(c.step), stateWord(c.state),
      Object.keys(c.metrics || {}).map(function (k) { return k + " " + td.formatNumber(c.metrics[k]); }).join(", ")];
    cells.forEach(function (text) { const td_ = document.createElement("td"); td_.textContent = text; row.appendChild(td_); });
    if (c.is_best) {
      const badge = document.createElement("span");
      badge.className = "badge"; badge.textContent = td.t("best");
      row.firstChild.append(" ", badge);
    }
    const download = document.createElement("td");
    if (c.committed) {
      const link = document.createElement("a");
      link.href = jobPath + "/checkpoints/" + c.step + "/archive";
      link.setAttribute("download", "");
      link.textContent = "zip";
      download.appendChild(link);
    } else { download.textContent = td.t("uploading…"); }
    row.appendChild(download);
    // The same cell as job.html renders: every committed checkpoint can be resumed from.
    const resume = document.createElement("td");
    if (c.committed && resumable) {
      const resumeForm = document.createElement("form");
      resumeForm.method = "post";
      resumeForm.action = "/jobs/" + encodeURIComponent(data.job_id) + "/resume";
      [["csrf_token", td.csrfToken()], ["from_step", String(c.step)]].forEach(function (pair) {
        const input = document.createElement("input");
        input.type = "hidden"; input.name = pair[0]; input.value = pair[1];
        resumeForm.appendChild(input);
      });
      const button = document.createElement("button");
      button.type = "submit"; button.textContent = td.t("Resume from here");
      if (c.step !== newest) button.title = td.t("later checkpoints and their metrics are dropped");
      resumeForm.appendChild(button);
      resume.appendChild(resumeForm);
    } else if (c.committed) {
      const dash = document.createElement("span");
      dash.className = "muted"; dash.textContent = "—";
      resume.appendChild(dash);
    }
    row.appendChild(resume);
    return row;
  }

  async function refreshCheckpoints() {
    const answer = await td.api("GET", jobPath + "/checkpoints");
    if (!answer.ok || !Array.isArray(answer.data)) return;
    const body = document.querySelector("#checkpoints tbody");
    body.textContent = "";
    body.dataset.refreshes = String(Number(body.dataset.refreshes || 0) + 1); // lets a test wait for a redraw
    const resumable = actions.indexOf("resume") !== -1;
    const newest = answer.data.filter(function (c) { return c.committed; }).reduce(function (m, c) { return Math.max(m, c.step); }, -1);
    answer.data.forEach(function (c) { body.appendChild(checkpointRow(c, resumable, newest)); });
    if (!answer.data.length) {
      const row = document.createElement("tr");
      row.className = "empty";
      const cell = document.createElement("td"); cell.colSpan = 5; cell.textContent = td.t("No checkpoint yet.");
      row.appendChild(cell); body.appendChild(row);
    }
  }

  function showActions(allowed) {
    actions = allowed;
    document.querySelectorAll("#job-actions form[data-action]").forEach(function (f) {
      f.hidden = allowed.indexOf(f.dataset.action) === -1;
    });
  }

  function showState(next, allowed) {
    const badge = document.getElementById("job-state");
    badge.textContent = stateWord(next);
    badge.className = "state state-" + next;
    showActions(allowed || data.actions_by_state[next] || []);
    // Only a training job has a time left; and the notice of the action that led here is now out of date.
    if (next !== "running" && next !== "pausing") document.getElementById("job-eta").textContent = "—";
    const notice = document.querySelector("main > p.notice[role=status]");
    if (notice) notice.remove();
  }

  // The job ended while the page was open: the parts that depend on how it ended (marked data-swap)
  // come from the page as the server now renders it, and their scripts start again on them.
  let outcomeShown = isTerminal(data.state); // a page rendered after the end already shows it
  async function showOutcome() {
    if (outcomeShown) return;
    outcomeShown = true;
    let doc = null;
    try {
      const response = await fetch(pagePath, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (response.ok) doc = new DOMParser().parseFromString(await response.text(), "text/html");
    } catch (networkError) { doc = null; }
    const fresh = doc && doc.getElementById("job-data");
    if (!fresh) { outcomeShown = false; return; } // tried again at the next poll
    const prompt = document.getElementById("playground-prompt");
    const typed = prompt ? prompt.value : "";
    document.querySelectorAll("[data-swap]").forEach(function (old) {
      const replacement = doc.getElementById(old.id);
      if (replacement) old.replaceWith(document.importNode(replacement, true));
    });
    const newPrompt = document.getElementById("playground-prompt");
    if (newPrompt && typed) newPrompt.value = typed;
    if (td.initPlayground) td.initPlayground();
    if (td.initExports) td.initExports();
    const freshData = JSON.parse(fresh.textContent);
    initSystem(freshData.system, freshData.system_origin);
    showState(freshData.state, freshData.actions);
    refreshCheckpoints();
    document.getElementById("job-data").dataset.outcome = freshData.state;
  }

  function isTerminal(name) { return data.terminal_states.indexOf(name) !== -1; }

  async function pollJob() {
    let answer;
    try { answer = await td.api("GET", pagePath + "/progress"); } catch (networkError) { answer = null; }
    if (answer && answer.ok && answer.data && answer.data.state) {
      const changed = answer.data.state !== state;
      state = answer.data.state;
      if (changed) showState(state);
      if (typeof answer.data.total_steps === "number") totalSteps = answer.data.total_steps;
      if (typeof answer.data.step === "number") setProgress(answer.data.step);
      // The server's time left (none once the job ends or is told to stop).
      document.getElementById("job-eta").textContent = answer.data.eta || "—";
      if (isTerminal(state)) await showOutcome();
      // Checkpoints are committed after their event arrives: follow them while the job lives.
      else refreshCheckpoints();
      if (isTerminal(state) && outcomeShown && streamEnded) return;
    }
    window.setTimeout(pollJob, POLL_MS);
  }

  // Cancel, and "Resume from here" (it deletes the later checkpoints), ask first in a dialog.
  function questionFor(form) {
    if (form.dataset.confirmTitle) {
      return { title: form.dataset.confirmTitle, text: form.dataset.confirmText || "", yes: form.dataset.confirmYes || td.t("Continue") };
    }
    const from = form.querySelector('input[name="from_step"]');
    if (!from) return null;
    const step = Number(from.value);
    const later = Array.from(document.querySelectorAll("#checkpoints tbody tr[data-step]"))
      .map(function (row) { return Number(row.dataset.step); })
      .filter(function (other) { return other > step; });
    let text = td.t("The job is queued again and continues from step {step}.", { step: step });
    if (later.length === 1) {
      text = td.t("The checkpoints after step {step} (step {later}) and their metrics are deleted. The job then trains again from step {step}.",
        { step: step, later: later[0] });
    } else if (later.length) {
      text = td.t("The checkpoints after step {step} (steps {later}) and their metrics are deleted. The job then trains again from step {step}.",
        { step: step, later: later.join(", ") });
    }
    return { title: td.t("Resume from step {step}?", { step: step }), text: text, yes: td.t("Resume from step {step}", { step: step }) };
  }

  function ask(question) {
    const dialog = document.getElementById("confirm-dialog");
    document.getElementById("confirm-title").textContent = question.title;
    document.getElementById("confirm-text").textContent = question.text;
    document.getElementById("confirm-yes").textContent = question.yes;
    return new Promise(function (resolve) {
      dialog.returnValue = "";
      dialog.addEventListener("close", function () { resolve(dialog.returnValue === "confirm"); }, { once: true });
      dialog.showModal(); // focus goes to "Go back"; Escape closes it without doing anything
    });
  }

  document.addEventListener("submit", function (event) {
    const form = event.target;
    const dialog = document.getElementById("confirm-dialog");
    if (!(form instanceof HTMLFormElement) || form.method !== "post" || !dialog || !dialog.showModal) return;
    const question = questionFor(form);
    if (!question) return;
    event.preventDefault();
    ask(question).then(function (yes) { if (yes) submitted(form).submit(); });
  });

  // The page redraws the checkpoints table while it lives (a refresh may land while the dialog is
  // open); a form it took out of the page submits nothing, so its fields go in a copy that is in it.
  function submitted(form) {
    if (form.isConnected) return form;
    const copy = document.createElement("form");
    copy.method = "post";
    copy.action = form.action;
    copy.hidden = true;
    new FormData(form).forEach(function (value, name) {
      const input = document.createElement("input");
      input.type = "hidden"; input.name = name; input.value = String(value);
      copy.appendChild(input);
    });
    document.body.appendChild(copy);
    return copy;
  }

  let streamEnded = false;
  let stoppedEarly = false;
  function openStream() {
    if (!window.EventSource) return;
    const source = new EventSource(jobPath + "/events/stream?after=" + data.last_event_id);
    function on(kind, handler) {
      source.addEventListener(kind, function (message) {
        const event = JSON.parse(message.data);
        data.last_event_id = Math.max(data.last_event_id, event.id || 0);
        handler(event.data || {}, event.time);
      });
    }
    on("metric", function (p, when) {
      addPoints(p, when);
      if (typeof p.step === "number") setProgress(p.step);
    });
    on("eval", function (p, when) { addPoints(p, when); });
    on("phase", function (p, when) {
      if (typeof p.total_steps === "number") totalSteps = p.total_steps;
      appendTimeline("phase", p, when);
    });
    on("checkpoint", function (p, when) { appendTimeline("checkpoint", p, when); window.setTimeout(refreshCheckpoints, 1500); });
    on("diagnosis", function (p, when) { appendTimeline("diagnosis", p, when); showDiagnosis(p); });
    on("result", function (p, when) { appendTimeline("result", p, when); if (p.stopped_early) stoppedEarly = true; });
    on("resume", function (p, when) { appendTimeline("resume", p, when); });
    on("log", function (p, when) { appendLog(p, when); });
    on("system", function (p, when) { addSystem(p, when); });
    source.addEventListener("end", function () {
      streamEnded = true;
      source.close();
      // The server states an early stop (where, why, the best checkpoint): show its page once the run has ended.
      if (stoppedEarly) { window.location.reload(); return; }
      refreshCheckpoints();
    });
  }

  // System readings (host CPU and memory, device use, memory, temperature, power) by seconds since the
  // first sample: drawn from the page's data, then extended by the stream's system events; when the job
  // ends, the section comes back from the server with every reading (see showOutcome).
  const SYSTEM_COLORS = { cpu_percent: "#2563eb", memory_used_mb: "#7c3aed", device_utilization_pct: "#059669",
    device_memory_used_mb: "#d97706", device_temperature_c: "#dc2626", device_power_w: "#0891b2" };
  let systemOrigin = null; // when the first sample was taken, in ms
  let systemCharts = {};
  function initSystem(series, origin) {
    systemOrigin = origin ? Date.parse(origin) : null;
    systemCharts = {};
    Object.keys(series || {}).forEach(function (key) {
      const plot = document.querySelector('[data-system="' + key + '"]');
      if (!plot) return;
      systemCharts[key] = new td.charts.LineChart(plot, { color: SYSTEM_COLORS[key], xStep: 0.1 }); // seconds, to tenths
      systemCharts[key].set(series[key]);
      plot.dataset.loaded = "true";
    });
  }
  function addSystem(payload, when) {
    const at = Date.parse(when);
    if (isNaN(at)) return;
    if (systemOrigin === null) systemOrigin = at;
    const seconds = Math.round((at - systemOrigin) / 100) / 10;
    Object.keys(systemCharts).forEach(function (key) {
      if (typeof payload[key] !== "number") return;
      systemCharts[key].add(seconds, payload[key]);
      systemCharts[key].draw();
    });
  }
  initSystem(data.system, data.system_origin);

  // A notice answers one action: drop it from the address so a reload does not repeat it.
  if (window.location.search.indexOf("notice=") !== -1) window.history.replaceState(null, "", window.location.pathname);
  showState(state, data.actions);
  board.redraw();
  Object.keys(points).forEach(loadSeries);
  loadAxis();
  openStream();
  window.setTimeout(pollJob, POLL_MS);
  document.getElementById("job-data").dataset.ready = "true";
})();
