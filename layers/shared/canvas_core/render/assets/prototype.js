(function () {
  "use strict";
  var screens = Array.prototype.slice.call(document.querySelectorAll(".screen"));
  var tabs = Array.prototype.slice.call(document.querySelectorAll("[data-screen]"));
  var prev = document.getElementById("prev"), next = document.getElementById("next");
  var position = document.getElementById("position");
  var current = 0;
  function show(n) {
    current = Math.max(0, Math.min(screens.length - 1, n));
    screens.forEach(function (s, i) { s.hidden = i !== current; });
    tabs.forEach(function (t, i) {
      if (i === current) t.setAttribute("aria-current", "step"); else t.removeAttribute("aria-current");
    });
    prev.disabled = current === 0; next.disabled = current === screens.length - 1;
    position.textContent = "Screen " + (current + 1) + " of " + screens.length;
    if (location.hash !== "#screen-" + current) history.replaceState(null, "", "#screen-" + current);
    var heading = screens[current].querySelector("h2"); if (heading) heading.focus();
  }
  tabs.forEach(function (t, i) { t.addEventListener("click", function () { show(i); }); });
  prev.addEventListener("click", function () { show(current - 1); });
  next.addEventListener("click", function () { show(current + 1); });
  document.addEventListener("keydown", function (e) {
    if (e.target && /input|textarea|select/i.test(e.target.tagName)) return;
    if (e.key === "ArrowRight") show(current + 1);
    if (e.key === "ArrowLeft") show(current - 1);
  });
  var start = parseInt((location.hash.match(/^#screen-(\d+)$/) || [])[1] || "0", 10);
  show(isNaN(start) ? 0 : start);
})();
