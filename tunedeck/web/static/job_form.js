"use strict";
// The training-job form: built on the server from TrainingConfig's JSON Schema (see form_spec.py);
// here, the same schema bounds are checked in the browser, derived values and the LR schedule are
// drawn live, and the config is sent to the JSON API, whose 422 issues land at their fields.
(function () {
  const td = window.tunedeck;
  const spec = td.jsonScript("form-spec");
  const form = document.getElementById("job-form");
  const fields = new Map(spec.fields.map(function (f) { return [f.key, f]; }));
  const SHAPE_STEPS = 1000; // drawn when no dataset is chosen: the schedule's shape only
  const POLY_LR_END = 1e-7; // the trainer's polynomial schedule ends here, not at 0
  const lrChart = new td.charts.LineChart(document.getElementById("lr-schedule"), { color: "#7c3aed" });

  function control(key) { return document.getElementById("f-" + key); }

  function rangeText(f) {
    const lo = f.minimum !== null ? String(f.minimum) : f.exclusive_minimum !== null ? td.t("above {value}", { value: f.exclusive_minimum }) : null;
    const hi = f.maximum !== null ? String(f.maximum) : f.exclusive_maximum !== null ? td.t("below {value}", { value: f.exclusive_maximum }) : null;
    if (lo !== null && hi !== null) return " " + td.t("(valid range {low} to {high})", { low: lo, high: hi });
    return "";
  }

  // {value} or {error}; value undefined means "leave the key out" (an empty optional field).
  function parse(f) {
    const el = control(f.key);
    if (f.kind === "checkbox") return { value: el.checked };
    const raw = el.value.trim();
    if (f.kind === "select") {
      // On/off choices beside an automatic one (packing: "auto" | true | false) are sent as booleans.
      const isSwitch = f.options.some(function (o) { return o[0] === "true"; });
      if (isSwitch && (raw === "true" || raw === "false")) return { value: raw === "true" };
      return { value: raw };
    }
    if (f.kind === "dataset" || f.kind === "job") return { value: raw === "" ? undefined : raw };
    if (f.kind === "choices") return parseChoices(f, raw);
    if (f.kind === "count") {
      // "auto" (the field's literal) or a whole number in the schema's range; empty means the default.
      if (raw === "") return { value: undefined };
      if (raw === f.list_literal) return { value: raw };
      if (!/^\d+$/.test(raw)) return { error: td.t("Enter \"{literal}\" or a whole number.", { literal: f.list_literal }) };
      return { value: Number(raw) };
    }
    if (f.kind === "integer" || f.kind === "number") {
      if (raw === "") return f.nullable ? { value: undefined } : { error: td.t("Enter a value.") };
      const n = Number(raw);
      if (!isFinite(n)) return { error: td.t("Enter a number.") };
      if (f.kind === "integer" && !Number.isInteger(n)) return { error: td.t("Enter a whole number.") };
      const range = rangeText(f);
      if (f.minimum !== null && n < f.minimum) return { error: td.t("Must be at least {value}{range}.", { value: f.minimum, range: range }) };
      if (f.exclusive_minimum !== null && n <= f.exclusive_minimum) return { error: td.t("Must be greater than {value}{range}.", { value: f.exclusive_minimum, range: range }) };
      if (f.maximum !== null && n > f.maximum) return { error: td.t("Must be at most {value}{range}.", { value: f.maximum, range: range }) };
      if (f.exclusive_maximum !== null && n >= f.exclusive_maximum) return { error: td.t("Must be less than {value}{range}.", { value: f.exclusive_maximum, range: range }) };
      return { value: n };
    }
    if (f.kind === "json") {
      if (raw === "") return { value: undefined };
      let parsed;
      try { parsed = JSON.parse(raw); } catch (e) { return { error: td.t("Not valid JSON: {reason}", { reason: e.message }) }; }
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return { error: td.t("Enter a JSON object.") };
      return { value: parsed };
    }
    if (f.kind === "list") {
      if (raw === "" && (f.nullable || f.options.length)) return { value: undefined };
      if (raw === "") {
        return { error: f.list_literal ? td.t("Enter \"{literal}\" or a comma-separated list.", { literal: f.list_literal })
          : td.t("Enter a comma-separated list.") };
      }
      if (f.list_literal && raw === f.list_literal) return { value: raw };
      const items = splitList(raw);
      // A list of names from a fixed set: each one must be among them.
      const names = f.options.map(function (o) { return o[0]; });
      const unknown = names.length ? items.filter(function (v) { return names.indexOf(v) === -1; }) : [];
      if (unknown.length) return { error: td.t("Not among {names}: {unknown}.", { names: names.join(", "), unknown: unknown.join(", ") }) };
      if (f.list_item !== "number") return { value: items };
      const numbers = items.map(Number);
      if (numbers.some(function (n) { return !isFinite(n); })) return { error: td.t("Enter numbers separated by commas.") };
      return { value: numbers };
    }
    if (f.min_length && raw.length < f.min_length) return { error: td.t("Enter at least {count} character(s).", { count: f.min_length }) };
    return { value: raw };
  }

  function splitList(raw) { return raw.split(",").map(function (s) { return s.trim(); }).filter(Boolean); }

  function currentTask() {
    const task = fields.get("task");
    return task ? parse(task).value : spec.defaults.task;
  }

  // One value (sent as it is) or several (sent as a list), each one the current task takes.
  function parseChoices(f, raw) {
    if (raw === "") return { value: undefined };
    const items = splitList(raw);
    const allowed = f.task_choices[currentTask()];
    const wrong = allowed ? items.filter(function (v) { return allowed.indexOf(v) === -1; }) : [];
    if (wrong.length) {
      return { error: td.t("Not a {task} value: {wrong} (choose from {allowed}).",
        { task: currentTask(), wrong: wrong.join(", "), allowed: allowed.join(", ") }) };
    }
    return { value: items.length === 1 ? items[0] : items };
  }

  // The suggestions of each one-or-several field follow the task; a value the new task does not take
  // becomes its first value (a dpo loss means nothing to kto).
  function followTask() {
    const task = currentTask();
    spec.fields.forEach(function (f) {
      if (f.kind !== "choices") return;
      const allowed = f.task_choices[task] || [];
      const list = document.getElementById("choices-" + f.key);
      list.replaceChildren.apply(list, allowed.map(function (v) { const o = document.createElement("option"); o.value = v; return o; }));
      const items = splitList(control(f.key).value);
      if (allowed.length && items.some(function (v) { return allowed.indexOf(v) === -1; })) control(f.key).value = allowed[0];
    });
  }

  function isShown(f) {
    if (f.tasks && f.tasks.indexOf(currentTask()) === -1) return false;
    if (!f.shown_when) return true;
    const controller = fields.get(f.shown_when[0]);
    if (!controller || !isShown(controller)) return false;
    const parsed = parse(controller);
    return f.shown_when[1].indexOf(parsed.value) !== -1;
  }

  function readConfig() {
    const config = {}, errors = {};
    spec.fields.forEach(function (f) {
      if (!isShown(f)) return;
      const parsed = parse(f);
      if (parsed.error) errors[f.key] = parsed.error;
      else if (parsed.value !== undefined) config[f.key] = parsed.value;
    });
    return { config: config, errors: errors };
  }

  function setValue(f, value) {
    const el = control(f.key);
    if (f.kind === "checkbox") el.checked = Boolean(value);
    else if (value === null || value === undefined) el.value = "";
    else if (Array.isArray(value)) el.value = value.join(", ");
    else if (f.kind === "json") el.value = JSON.stringify(value, null, 2);
    else el.value = String(value);
  }

  function selectedRows() {
    const option = control("train_dataset_id").selectedOptions[0];
    const rows = option ? Number(option.dataset.rows) : NaN;
    return isFinite(rows) && rows > 0 ? rows : null;
  }

  function num(config, key) { return typeof config[key] === "number" ? config[key] : spec.defaults[key]; }

  function lrAt(step, total, warmup, config) {
    const peak = num(config, "learning_rate");
    const kind = config.lr_scheduler || spec.defaults.lr_scheduler;
    if (kind === "constant") return peak;
    if (step < warmup) return peak * step / Math.max(1, warmup);
    const progress = (step - warmup) / Math.max(1, total - warmup);
    if (kind === "linear") return peak * Math.max(0, 1 - progress);
    if (kind === "cosine") return peak * Math.max(0, 0.5 * (1 + Math.cos(Math.PI * progress)));
    if (kind === "polynomial") {
      if (step > total) return POLY_LR_END;
      return (peak - POLY_LR_END) * Math.pow(1 - progress, num(config, "polynomial_power")) + POLY_LR_END;
    }
    return peak; // constant_with_warmup after its warmup
  }

  // The same arithmetic as tunedeck/config/derived.py (no dropped last batch, warmup rounded up but never
  // every step: at least one step runs past the warmup, whose first step trains at a learning rate of 0).
  function derive(config) {
    const batch = num(config, "batch_size"), accumulation = num(config, "gradient_accumulation_steps");
    const epochs = num(config, "epochs"), ratio = num(config, "warmup_ratio");
    const out = { effective_batch_size: batch * accumulation };
    const rows = selectedRows();
    const constant = (config.lr_scheduler || spec.defaults.lr_scheduler) === "constant";
    // Every process takes its own micro-batch: the same count as `placement` in tunedeck/config/distribution.py.
    const devices = typeof config.devices === "number" ? config.devices : 0;
    const processes = (typeof config.processes === "number" ? config.processes : Math.max(1, devices)) *
      (typeof config.machines === "number" ? config.machines : 1);
    out.effective_batch_size = batch * accumulation * processes;
    const total = rows ? epochs * Math.max(Math.ceil(Math.ceil(rows / (batch * processes)) / accumulation), 1) : SHAPE_STEPS;
    if (rows) {
      out.steps_per_epoch = total / epochs;
      out.total_steps = total;
    }
    out.warmup_steps = constant ? 0 : Math.min(Math.ceil(total * ratio), Math.max(total - 1, 0));
    return { values: out, total: total, known: Boolean(rows) };
  }

  function refresh() {
    spec.fields.forEach(function (f) {
      const wrapper = form.querySelector('[data-field="' + f.key + '"]');
      if (wrapper) wrapper.hidden = !isShown(f);
    });
    // A section whose every key is hidden for this task goes too.
    form.querySelectorAll("[data-task-section]").forEach(function (section) {
      section.hidden = !section.querySelector("[data-field]:not([hidden])");
    });
    const read = readConfig();
    document.getElementById("config-json").textContent = JSON.stringify(read.config, null, 2);
    const derived = derive(read.config);
    ["effective_batch_size", "steps_per_epoch", "total_steps", "warmup_steps"].forEach(function (key) {
      const value = derived.values[key];
      document.getElementById("derived-" + key).textContent = value === undefined || !isFinite(value) ? "—" : String(value);
    });
    showScheduleWarnings(derived, read.config);
    // What the workers will train in: "auto" is decided on each worker, from the hardware it reported.
    const precision = read.config.mixed_precision || spec.defaults.mixed_precision;
    document.getElementById("derived-precision").textContent =
      precision === "auto" ? td.t("auto: {note}", { note: document.getElementById("derived-precision").dataset.auto }) : precision;
    showSummary(derived.values, precision);
    document.getElementById("derived-note").textContent = derived.known
      ? td.t("From the training dataset's row count.")
      : td.t("Choose a training dataset to see steps; the plot shows the schedule's shape over {steps} steps.", { steps: SHAPE_STEPS });
    if (!read.errors.learning_rate) {
      const points = [], samples = Math.min(derived.total, 300);
      for (let i = 0; i <= samples; i++) {
        const step = Math.round(i * derived.total / samples);
        points.push([step, lrAt(step, derived.total, derived.values.warmup_steps, read.config)]);
      }
      lrChart.set(points);
    }
    return read;
  }

  // The gist of the derived values, kept in sight at the bottom of a narrow screen.
  function showSummary(values, precision) {
    const shown = function (value) { return value === undefined || !isFinite(value) ? "—" : String(value); };
    document.querySelector("#derived-summary a").textContent =
      td.t("Batch {batch} · {steps} steps · warmup {warmup} · {precision}", { batch: shown(values.effective_batch_size),
        steps: shown(values.total_steps), warmup: shown(values.warmup_steps), precision: precision });
  }

  // The same warnings as `schedule_warnings` in tunedeck/config/config_warnings.py.
  function showScheduleWarnings(derived, config) {
    const list = document.getElementById("derived-warnings");
    list.replaceChildren();
    const total = derived.values.total_steps, warmup = derived.values.warmup_steps;
    const texts = [];
    if (derived.known && warmup && 2 * warmup >= total && total > 1) {
      texts.push(td.t("{warmup} of the {total} step(s) are warmup: the learning rate reaches {rate} only in the second half of the run, and the first step trains at 0. Lower warmup_ratio, or train more steps.",
        { warmup: warmup, total: total, rate: num(config, "learning_rate") }));
    }
    if (derived.known && total < spec.few_steps) {
      texts.push(td.t("Only {total} optimizer step(s): too few to learn much. Add epochs or data, or lower the batch size or accumulation.",
        { total: total }));
    }
    texts.forEach(function (text) {
      const item = document.createElement("li");
      item.textContent = text;
      list.appendChild(item);
    });
    list.hidden = texts.length === 0;
  }

  function showErrors(errors) {
    let first = null;
    Object.keys(errors).forEach(function (key) {
      const shown = td.setFieldError(key, errors[key]);
      if (!shown) {
        document.getElementById("form-error").textContent += key + ": " + errors[key] + " ";
      }
      if (!first && shown) first = key;
    });
    if (first) {
      const details = control(first) && control(first).closest("details");
      if (details) details.open = true;
      control(first).focus();
    }
    if (Object.keys(errors).length) {
      const n = Object.keys(errors).length;
      document.getElementById("form-error").textContent =
        (n === 1 ? td.t("One field needs attention.") : td.t("{count} fields need attention.", { count: n })) + " " +
        document.getElementById("form-error").textContent;
    }
  }

  function requestBody(config) {
    const name = control("name").value.trim();
    // A copy is sent whole, as "View JSON" shows it: a cleared field means the key's default, not the source's value.
    if (spec.clone_of) {
      return { name: name || undefined, config: config, replace_config: true,
               base_model_id: control("base_model_id").value, train_dataset_id: control("train_dataset_id").value };
    }
    const body = { name: name, base_model_id: control("base_model_id").value, train_dataset_id: control("train_dataset_id").value, config: config };
    const experiment = control("experiment_id");
    if (experiment && experiment.value) body.experiment_id = experiment.value;
    return body;
  }

  async function submit(event) {
    event.preventDefault();
    td.clearErrors(form);
    const read = refresh();
    const errors = Object.assign({}, read.errors);
    if (!control("name").value.trim()) errors.name = td.t("Give the job a name.");
    if (!control("base_model_id").value) errors.base_model_id = td.t("Choose a base model.");
    if (!control("train_dataset_id").value) errors.train_dataset_id = td.t("Choose a training dataset.");
    if (Object.keys(errors).length) { showErrors(errors); return; }
    const button = document.getElementById("submit-job");
    button.disabled = true;
    try {
      const path = spec.clone_of ? "/api/v1/jobs/" + encodeURIComponent(spec.clone_of) + "/clone" : "/api/v1/jobs";
      const answer = await td.api("POST", path, requestBody(read.config));
      if (answer.ok) { window.location.assign("/jobs/" + encodeURIComponent(answer.data.id)); return; }
      const serverErrors = {};
      td.issuesOf(answer.data).forEach(function (issue) {
        const key = issue.field.replace(/^config\./, "") || "_form";
        serverErrors[key] = serverErrors[key] ? serverErrors[key] + " " + issue.message : issue.message;
      });
      if (!Object.keys(serverErrors).length) serverErrors._form = (answer.data && answer.data.detail) || td.t("The server refused the job ({status}).", { status: answer.status });
      showErrors(serverErrors);
    } catch (networkError) {
      document.getElementById("form-error").textContent = td.t("The server could not be reached: {reason}", { reason: networkError.message });
    } finally {
      button.disabled = false;
    }
  }

  function applyRecipe() {
    const name = document.getElementById("recipe").value;
    const recipe = spec.recipes.find(function (r) { return r.name === name; });
    if (!recipe) return;
    spec.fields.forEach(function (f) {
      if (f.kind === "dataset") return; // the data choice is not part of a recipe
      setValue(f, Object.prototype.hasOwnProperty.call(recipe.values, f.key) ? recipe.values[f.key] : spec.defaults[f.key]);
    });
    followTask();
    td.clearErrors(form);
    refresh();
  }

  // A check's status word (job_view.CHECK_STATUS_LABELS, or a report's overall status) in the page's language.
  const STATUS_WORDS = { passed: td.t("passed"), warning: td.t("warning"), failed: td.t("failed"), skipped: td.t("skipped"),
                         pass: td.t("pass"), warn: td.t("warn"), fail: td.t("fail") };
  function statusWord(status) { return STATUS_WORDS[status] || status; }

  // Preflight (the checks before training): the same references and config as the job, checked by the engine; nothing is queued.
  async function runPreflight() {
    td.clearErrors(form);
    const read = refresh();
    const errors = Object.assign({}, read.errors);
    if (!control("base_model_id").value) errors.base_model_id = td.t("Choose a base model.");
    if (!control("train_dataset_id").value) errors.train_dataset_id = td.t("Choose a training dataset.");
    if (Object.keys(errors).length) { showErrors(errors); return; }
    const button = document.getElementById("run-preflight");
    const result = document.getElementById("preflight-result");
    const summary = document.getElementById("preflight-summary");
    const body = requestBody(read.config);
    delete body.name;
    delete body.experiment_id;
    if (read.config.validation_dataset_id) body.validation_dataset_id = String(read.config.validation_dataset_id);
    button.disabled = true;
    button.textContent = td.t("Checking… (a real training step, a tiny overfit, a checkpoint cycle)");
    result.hidden = false;
    summary.textContent = td.t("Running the checks…");
    document.getElementById("preflight-checks").replaceChildren();
    const bar = document.getElementById("preflight-progress");
    bar.hidden = false;
    bar.removeAttribute("value");  // indeterminate until the worker says which check runs
    const answer = await td.work("POST", "/api/v1/preflight", body, function (phase, progress) {
      if (progress && progress.total) {
        bar.max = progress.total;
        bar.value = progress.done;
        summary.textContent = td.t("Check {number} of {total}: {check}…",
          { number: Math.min(progress.done + 1, progress.total), total: progress.total, check: progress.check || phase });
      } else {
        summary.textContent = td.t("Running the checks… ({phase})", { phase: phase });
      }
    });
    bar.hidden = true;
    button.disabled = false;
    button.textContent = td.t("Run preflight");
    if (!answer.ok) {
      const issues = td.issuesOf(answer.data);
      summary.textContent = td.t("Preflight could not run: {reason}", { reason: issues.length
        ? issues.map(function (i) { return (i.field ? i.field + ": " : "") + i.message; }).join("; ")
        : ((answer.data && answer.data.detail) || answer.status) });
      return;
    }
    const report = answer.data.report;
    summary.textContent = answer.data.ok
      ? td.t("Overall: {status} — ready to train.", { status: statusWord(answer.data.status) })
      : td.t("Overall: {status} — fix the failed checks first.", { status: statusWord(answer.data.status) });
    summary.dataset.status = answer.data.status;
    (report.checks || []).forEach(function (check) {
      const row = document.createElement("tr");
      row.dataset.status = check.status;
      // A skipped check says so, and why ("not run: an earlier check failed"): the failure shows once, on its own row.
      const status = statusWord(spec.check_status_labels[check.status] || check.status);
      [String(check.number), check.name, status, check.message, (check.advice || []).join(" ")].forEach(function (text) {
        const cell = document.createElement("td");
        cell.textContent = text;
        row.appendChild(cell);
      });
      document.getElementById("preflight-checks").appendChild(row);
    });
  }
  const preflightButton = document.getElementById("run-preflight");
  if (preflightButton) preflightButton.addEventListener("click", runPreflight);

  // Live messages: a field's error clears as soon as its value is valid again, and a new
  // error shows when the field is left (not while the value is still being typed).
  function revalidate(event, showNew) {
    const read = refresh();
    const target = event.target;
    if (!target || !target.id || target.id.indexOf("f-") !== 0) return;
    const key = target.id.slice(2);
    const message = read.errors[key] || "";
    if (!message || showNew) td.setFieldError(key, message);
    if (!Object.keys(read.errors).length) document.getElementById("form-error").textContent = "";
  }
  const taskControl = control("task");
  if (taskControl) taskControl.addEventListener("change", followTask);
  form.addEventListener("input", function (event) { revalidate(event, false); });
  form.addEventListener("change", function (event) { revalidate(event, true); });
  form.addEventListener("submit", submit);
  document.getElementById("apply-recipe").addEventListener("click", applyRecipe);
  followTask();
  refresh();
  // The chosen base model's facts (parameters, size, architecture, licence, chat template) under its picker.
  const modelPicker = control("base_model_id");
  const modelFacts = document.getElementById("base-model-facts");
  function showModelFacts() {
    const option = modelPicker.selectedOptions[0];
    modelFacts.textContent = option && option.value ? option.dataset.facts
      : td.t("Choose a base model to see its size, architecture, licence and chat template.");
  }
  if (modelPicker && modelFacts) { modelPicker.addEventListener("change", showModelFacts); showModelFacts(); }
  form.dataset.ready = "true";
})();
