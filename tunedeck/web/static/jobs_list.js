"use strict";
// The jobs list: "Compare selected" is offered for 2 to 10 ticked jobs (the compare page refuses other counts).
(function () {
  const td = window.tunedeck;
  const MIN = 2, MAX = 10;
  const form = document.getElementById("compare-form");
  if (!form) return;
  const button = document.getElementById("compare-selected");
  const help = document.getElementById("compare-help");
  const boxes = Array.from(document.querySelectorAll('input[type=checkbox][form="compare-form"]'));

  function show() {
    const ticked = boxes.filter(function (box) { return box.checked; }).length;
    button.disabled = ticked < MIN || ticked > MAX;
    if (ticked === 0) help.textContent = td.t("Tick {least} to {most} jobs to overlay their curves and see how their configs differ.", { least: MIN, most: MAX });
    else if (ticked < MIN) help.textContent = td.t("1 job ticked: tick at least one more to compare.");
    else if (ticked > MAX) help.textContent = td.t("{count} jobs ticked: compare at most {most} at a time.", { count: ticked, most: MAX });
    else help.textContent = td.t("{count} jobs ticked.", { count: ticked });
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
