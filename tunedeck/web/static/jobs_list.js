"use strict";
// The jobs list: "Compare selected" is offered for 2 to 10 ticked jobs (the compare page refuses other counts).
(function () {
  const MIN = 2, MAX = 10;
  const form = document.getElementById("compare-form");
  if (!form) return;
  const button = document.getElementById("compare-selected");
  const help = document.getElementById("compare-help");
  const boxes = Array.from(document.querySelectorAll('input[type=checkbox][form="compare-form"]'));

  function show() {
    const ticked = boxes.filter(function (box) { return box.checked; }).length;
    button.disabled = ticked < MIN || ticked > MAX;
    const t = window.tunedeckWords;
    if (ticked === 0) help.textContent = t("Tick {min} to {max} jobs to overlay their curves and see how their configs differ.", { min: MIN, max: MAX });
    else if (ticked < MIN) help.textContent = t("1 job ticked: tick at least one more to compare.");
    else if (ticked > MAX) help.textContent = t("{count} jobs ticked: compare at most {max} at a time.", { count: ticked, max: MAX });
    else help.textContent = t("{count} jobs ticked.", { count: ticked });
  }

  boxes.forEach(function (box) { box.addEventListener("change", show); });
  // One `ids` parameter, comma-separated, so the compare page's address stays short and can be shared.
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    const ids = boxes.filter(function (box) { return box.checked; }).map(function (box) { return box.value; });
    window.location.assign(form.action + "?ids=" + ids.map(encodeURIComponent).join(","));
  });
  show();
})();
