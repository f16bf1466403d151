(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("app-data").textContent);
  var SVG = "http://www.w3.org/2000/svg";
  var COLOURS = ["#1f4e79", "#2e86ab", "#f2994a"];
  var status = document.getElementById("status");
  function number(value) {
    var text = String(value).replace(/[\s,$€£¥%]/g, "").replace(/^\((.*)\)$/, "-$1");
    return /^-?(\d+\.?\d*|\.\d+)$/.test(text) ? parseFloat(text) : NaN;
  }
  // A figure on the chart: thousands separated, large ones shortened (9.57M) so a label fits its place.
  function full(value) { return Number(value).toLocaleString("en-US", { maximumFractionDigits: 2 }); }
  function short(value) {
    var size = Math.abs(value);
    if (size >= 1e9) { return (value / 1e9).toFixed(2).replace(/\.?0+$/, "") + "B"; }
    if (size >= 1e6) { return (value / 1e6).toFixed(2).replace(/\.?0+$/, "") + "M"; }
    if (size >= 1e4) { return (value / 1e3).toFixed(1).replace(/\.0$/, "") + "k"; }
    return full(value);
  }
  function svg(tag, attrs, text) {
    var el = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { el.setAttribute(k, attrs[k]); });
    if (text !== undefined) el.textContent = text;
    return el;
  }
  // How wide a text is at a size, in the page's font (the chart's units are pixels at that size).
  function textWidth(box, size) {
    var context = document.createElement("canvas").getContext("2d");
    context.font = size + "px " + getComputedStyle(box).fontFamily;
    return function (text) { return context.measureText(text).width; };
  }
  // One measure at a time (its own scale); rows that share a label are added up (or averaged, for a measure
  // such as an average or a rate that does not add up), so a category's bar is the category's figure.
  function drawChart(box, t, rows, measure) {
    box.textContent = "";
    if (!t.chart) return;
    var label = t.chart.label, sums = t.chart.sums[t.chart.values.indexOf(measure)];
    var groups = [], byName = {};
    rows.forEach(function (r) {
      var v = number(r[measure]);
      if (isNaN(v)) return;
      var name = String(r[label]);
      if (!(name in byName)) { byName[name] = { name: name, total: 0, count: 0 }; groups.push(byName[name]); }
      byName[name].total += v; byName[name].count += 1;
    });
    var merged = groups.some(function (g) { return g.count > 1; });
    var bars = groups.slice(0, 24).map(function (g) {
      var v = sums || g.count === 1 ? g.total : g.total / g.count;
      return { name: g.name, value: Math.round(v * 100) / 100 };
    });
    var title = document.createElement("p"); title.className = "chart-title";
    var how = merged ? (sums ? " (total)" : " (average)") : "";
    title.textContent = t.headers[measure] + how + " by " + t.headers[label];
    box.appendChild(title);
    // Drawn at the width it is shown at, so its lettering stays legible on a phone.
    var width = Math.max(320, Math.min(960, box.clientWidth || 820)), height = 300, left = 56, bottom = 48, top = 20;
    var values = bars.map(function (b) { return b.value; });
    var max = Math.max.apply(null, [0].concat(values)), min = Math.min.apply(null, [0].concat(values));
    var span = (max - min) || 1;
    // Labels that would run into their neighbours side by side are slanted; where even slanted they would, only
    // every few bars is named (each bar's title names it), and figures that would overlap are left out.
    var names = bars.map(function (b) { return b.name.length > 14 ? b.name.slice(0, 13) + "…" : b.name; });
    var measure = textWidth(box, 12), slot = (width - left - 8) / Math.max(1, bars.length);
    var widest = Math.max.apply(null, [0].concat(names.map(function (n) { return measure(n); })));
    var slanted = widest > slot - 6, every = 1;
    if (slanted) {
      every = Math.ceil(16 / (slot * Math.SQRT1_2));
      left = Math.max(left, Math.ceil(widest * Math.SQRT1_2 - slot / 2 + 4));
      slot = (width - left - 8) / Math.max(1, bars.length);
      bottom = Math.ceil(widest * Math.SQRT1_2) + 24;
      height += bottom - 48;
    }
    var figure = textWidth(box, 11);
    var figures = bars.length <= 16 && bars.every(function (b) { return figure(short(b.value)) <= slot - 2; });
    var plot = svg("svg", { viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": title.textContent });
    var y = function (v) { return top + (max - v) / span * (height - top - bottom); };
    for (var k = 0; k <= 4; k++) {
      var tick = min + span * k / 4, yy = y(tick);
      plot.appendChild(svg("line", { x1: left, x2: width - 8, y1: yy, y2: yy, stroke: "#d9e2ec" }));
      plot.appendChild(svg("text", { x: left - 6, y: yy + 4, "text-anchor": "end", "class": "axis" },
        short(tick)));
    }
    var bar = Math.max(4, slot * 0.6);
    bars.forEach(function (b, i) {
      var x = left + i * slot + (slot - bar) / 2;
      var y0 = y(Math.max(0, b.value)), y1 = y(Math.min(0, b.value));
      var rect = svg("rect", { x: x, y: y0, width: bar, height: Math.max(1, y1 - y0), fill: COLOURS[0], rx: 2 });
      rect.appendChild(svg("title", {}, b.name + ": " + full(b.value)));
      plot.appendChild(rect);
      if (figures) {
        plot.appendChild(svg("text", { x: x + bar / 2, y: y0 - 5, "text-anchor": "middle", "class": "value" },
          short(b.value)));
      }
      if (i % every) return;
      var cx = x + bar / 2, cy = height - bottom + (slanted ? 12 : 18);
      plot.appendChild(svg("text", slanted
        ? { x: cx, y: cy, "text-anchor": "end", transform: "rotate(-45 " + cx + " " + cy + ")", "class": "bar-label" }
        : { x: cx, y: cy, "text-anchor": "middle", "class": "bar-label" }, names[i]));
    });
    box.appendChild(plot);
  }
  data.tables.forEach(function (t, i) {
    var card = document.querySelector('.data-card[data-table="' + i + '"]');
    var search = card.querySelector(".rows-filter");
    var pick = card.querySelector(".rows-column");
    var measure = card.querySelector(".chart-measure");
    var count = card.querySelector(".row-count");
    var chart = card.querySelector(".chart");
    var table = card.querySelector("table");
    var head = document.createElement("thead"), hr = document.createElement("tr");
    var body = document.createElement("tbody");
    var numeric = t.headers.map(function (h, c) {
      return t.rows.length > 0 && t.rows.every(function (r) { return r[c] === "" || !isNaN(number(r[c])); });
    });
    var sortBy = -1, ascending = true;
    if (pick && t.category !== null) {
      var seen = {};
      t.rows.forEach(function (r) { seen[r[t.category]] = true; });
      Object.keys(seen).sort().forEach(function (v) {
        var option = document.createElement("option"); option.value = v; option.textContent = v || "(empty)";
        pick.appendChild(option);
      });
    }
    function shown() {
      var q = search.value.trim().toLowerCase(), only = pick ? pick.value : "";
      var rows = t.rows.filter(function (r) {
        if (only && r[t.category] !== only) return false;
        return !q || r.some(function (c) { return String(c).toLowerCase().indexOf(q) !== -1; });
      });
      if (sortBy >= 0) {
        rows.sort(function (a, b) {
          var x = number(a[sortBy]), y = number(b[sortBy]);
          var c = numeric[sortBy] && !isNaN(x) && !isNaN(y)
            ? x - y : String(a[sortBy]).localeCompare(String(b[sortBy]));
          return ascending ? c : -c;
        });
      }
      return rows;
    }
    function render() {
      var rows = shown();
      body.textContent = "";
      rows.forEach(function (r) {
        var tr = document.createElement("tr");
        r.forEach(function (c, k) {
          var td = document.createElement("td"); td.textContent = c;
          if (numeric[k]) td.className = "num";
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      count.textContent = rows.length + " of " + t.rows.length + " rows";
      if (t.chart) drawChart(chart, t, rows, measure ? Number(measure.value) : t.chart.values[0]);
    }
    t.headers.forEach(function (h, c) {
      var th = document.createElement("th"); th.textContent = h; th.className = "sortable"; th.scope = "col";
      th.tabIndex = 0;
      function sort() {
        ascending = sortBy === c ? !ascending : true; sortBy = c;
        Array.prototype.forEach.call(hr.children, function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        render();
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(); });
      hr.appendChild(th);
    });
    head.appendChild(hr); table.appendChild(head); table.appendChild(body);
    search.addEventListener("input", render);
    if (pick) pick.addEventListener("change", render);
    if (measure) measure.addEventListener("change", render);
    render();
  });

  var storeKey = "canvas-app:" + data.title;
  var done = {};
  try { done = JSON.parse(localStorage.getItem(storeKey) || "{}"); } catch (e) { done = {}; }
  var filter = document.getElementById("filter");
  var section = document.getElementById("section-filter");
  var list = document.getElementById("points");
  var progress = document.getElementById("progress");
  var points = [];
  data.sections.forEach(function (s, si) {
    s.points.forEach(function (p, pi) { points.push({ key: si + ":" + pi, section: s.title, text: p }); });
    var option = document.createElement("option");
    option.value = s.title; option.textContent = s.title || "Overview";
    section.appendChild(option);
  });
  function save() { try { localStorage.setItem(storeKey, JSON.stringify(done)); } catch (e) { /* private mode */ } }
  function renderPoints() {
    var q = filter.value.trim().toLowerCase();
    var only = section.value;
    list.textContent = "";
    var visible = 0;
    points.forEach(function (p) {
      if (only && p.section !== only) return;
      if (q && p.text.toLowerCase().indexOf(q) === -1) return;
      visible += 1;
      var li = document.createElement("li");
      var box = document.createElement("input");
      box.type = "checkbox"; box.checked = !!done[p.key]; box.setAttribute("aria-label", "Mark as done");
      box.addEventListener("change", function () { done[p.key] = box.checked; save(); renderPoints(); });
      var text = document.createElement("span");
      var tag = document.createElement("small");
      tag.className = "tag"; tag.textContent = p.section || "Overview";
      text.appendChild(tag);
      text.appendChild(document.createTextNode(p.text));
      if (done[p.key]) li.className = "done";
      li.appendChild(box); li.appendChild(text); list.appendChild(li);
    });
    var ticked = points.filter(function (p) { return done[p.key]; }).length;
    progress.textContent = ticked + " of " + points.length + " done · " + visible + " shown";
  }
  filter.addEventListener("input", renderPoints);
  section.addEventListener("change", renderPoints);
  document.getElementById("clear-done").addEventListener("click", function () { done = {}; save(); renderPoints(); });
  document.getElementById("copy-summary").addEventListener("click", function () {
    var lines = points.filter(function (p) { return !done[p.key]; }).map(function (p) { return "- " + p.text; });
    var text = data.title + "\n" + lines.join("\n");
    if (navigator.clipboard) {
      navigator.clipboard.writeText(text).then(function () { status.textContent = "Open points copied."; },
        function () { status.textContent = "Copying is not allowed here."; });
    } else { status.textContent = "Copying is not available in this browser."; }
  });
  // A cell a spreadsheet would read as a formula is written as text (OWASP CSV injection).
  function cell(value) {
    var text = String(value);
    if (/^[=+\-@\t\r]/.test(text) && isNaN(number(text))) text = "'" + text;
    return '"' + text.replace(/"/g, '""') + '"';
  }
  document.getElementById("export-csv").addEventListener("click", function () {
    var csv = data.tables.map(function (t) {
      return [t.headers].concat(t.rows).map(function (r) { return r.map(cell).join(","); }).join("\n");
    }).join("\n\n");
    var lines = points.map(function (p) { return cell(p.section) + "," + cell(p.text); });
    var blob = new Blob([csv || ("Section,Point\n" + lines.join("\n"))], { type: "text/csv" });
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob); link.download = "export.csv";
    document.body.appendChild(link); link.click(); link.remove();
    status.textContent = "Exported export.csv.";
  });
  var sources = document.getElementById("sources");
  data.sources.forEach(function (s) {
    var li = document.createElement("li");
    var label = s.title + (s.detail ? " (" + s.detail + ")" : "");
    if (s.url && /^https?:\/\//i.test(s.url)) {
      var a = document.createElement("a"); a.href = s.url; a.rel = "noopener noreferrer"; a.textContent = label;
      li.appendChild(a);
    } else { li.textContent = label; }
    sources.appendChild(li);
  });
  renderPoints();
})();
