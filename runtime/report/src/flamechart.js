// The flame chart's script (see flamechart.rs): zoom into a frame's time range, reset, search by
// name. Written once into the SVG as a function expression, which the writer calls with the
// chart's constants `k`: char (width of a character), row (height of a row), hit (width of a
// recorded stack's column), match (the fill of a matching frame), axisY (the time axis's line),
// gridBottom (where its gridlines end). It reads everything else from the document, and only
// changes attributes and labels, always from what it saved when it started, so a reset gives
// back the geometry as drawn. Each action walks the frames once (a search also sorts the spans
// of the frames it matched).
//
// Horizontal positions are kept in thousandths of a pixel (integers, the grid the writer puts
// every edge on), so comparisons are exact. A frame's extent in time is [X, X + T]; T is 0 for
// a recorded stack's column (drawn `hit` pixels wide at its time).
(function (k) {
  "use strict";
  var script = document.currentScript;
  var svg = (script && script.ownerSVGElement) || document.documentElement;
  var NS = "http://www.w3.org/2000/svg";
  var x0 = parseFloat(svg.getAttribute("data-x0"));
  var chart = parseFloat(svg.getAttribute("data-chart-width"));
  var span = parseFloat(svg.getAttribute("data-ns"));
  var width = parseFloat(svg.getAttribute("width"));
  var X0 = units(x0), CHART = units(chart);

  function units(v) {
    return Math.round(parseFloat(v) * 1000);
  }
  function one(selector) {
    return svg.querySelector(selector);
  }
  function show(el, on) {
    if (on) el.removeAttribute("visibility");
    else el.setAttribute("visibility", "hidden");
  }
  function hide(el, hidden) {
    if (hidden) el.setAttribute("display", "none");
    else el.removeAttribute("display");
  }

  var ctl = {
    reset: one(".bp-reset"),
    search: one(".bp-search"),
    matched: one(".bp-matched"),
    clear: one(".bp-clear"),
  };
  var ticks = one(".bp-ticks"), zoomAxis = one(".bp-zoomaxis");

  // A label (a frame's or a thread's): the text element if there is one, what it said and
  // where, so that it can be put back; one made while zoomed is removed again.
  function label(parent, text, full, y, attributes) {
    return {
      parent: parent, el: text, full: full, y: y, attributes: attributes,
      x: text && text.getAttribute("x"), text: text && text.textContent, made: false,
    };
  }
  // `full` cut with ".." to fit `w` pixels, as the writer cuts it; "" when fewer than 3
  // characters fit.
  function cut(full, w) {
    var fits = Math.floor(w / k.char);
    if (fits < 3) return "";
    var chars = Array.from(full);
    return chars.length <= fits ? full : chars.slice(0, fits - 2).join("") + "..";
  }
  function fit(l, x, w) {
    var text = cut(l.full, w);
    if (!l.el) {
      if (!text) return;
      l.el = document.createElementNS(NS, "text");
      l.el.setAttribute("y", l.y);
      for (var a in l.attributes) l.el.setAttribute(a, l.attributes[a]);
      l.parent.appendChild(l.el);
      l.made = true;
    }
    l.el.setAttribute("x", x.toFixed(3));
    l.el.textContent = text;
  }
  function unfit(l) {
    if (l.made) {
      l.el.remove();
      l.el = null;
      l.made = false;
    } else if (l.el) {
      l.el.setAttribute("x", l.x);
      l.el.textContent = l.text;
    }
  }

  // The threads, each with its frames, its label and the end line of its process.
  var lanes = [], frames = [];
  svg.querySelectorAll("g.lane").forEach(function (g) {
    var lane = { frames: [], ends: [], total: 0 };
    lane.left = units(g.getAttribute("data-left"));
    lane.right = units(g.getAttribute("data-right"));
    lane.end = units(g.getAttribute("data-end"));
    lane.label = label(g, g.querySelector(":scope > text.lbl"), g.getAttribute("data-label"),
      g.getAttribute("data-y"), { "class": "lbl", "font-weight": "bold" });
    g.querySelectorAll(":scope > g.f").forEach(function (f) {
      var rect = f.querySelector("rect"), title = f.querySelector("title").textContent;
      var hit = f.classList.contains("h");
      var y = parseFloat(rect.getAttribute("y"));
      var frame = {
        g: f, rect: rect, lane: lane, hit: hit, y: y,
        // The title is "NAME (duration or hit, ...)"; names may hold " (" themselves.
        name: title.slice(0, title.lastIndexOf(" (")),
        x: rect.getAttribute("x"), w: rect.getAttribute("width"), fill: rect.getAttribute("fill"),
        // Whether its geometry or label differs from the chart as drawn.
        moved: false,
      };
      frame.X = units(frame.x);
      frame.W = units(frame.w);
      frame.T = hit ? 0 : frame.W;
      frame.label = label(f, f.querySelector("text"), frame.name, y + k.row - 4.5, {});
      lane.frames.push(frame);
      frames.push(frame);
    });
    g.querySelectorAll(":scope > g.pe line").forEach(function (line) {
      lane.ends.push({ el: line, x: line.getAttribute("x1"), X: units(line.getAttribute("x1")) });
    });
    lane.total = covered(lane.frames);
    lanes.push(lane);
  });
  var total = lanes.reduce(function (sum, lane) { return sum + lane.total; }, 0);

  // Thousandths of a pixel covered by `frames` (nested or overlapping ones counted once).
  function covered(frames) {
    var spans = frames.filter(function (f) { return f.T > 0; })
      .map(function (f) { return [f.X, f.X + f.T]; })
      .sort(function (a, b) { return a[0] - b[0]; });
    var sum = 0, end = -Infinity;
    spans.forEach(function (s) {
      if (s[1] <= end) return;
      sum += s[1] - Math.max(s[0], end);
      end = s[1];
    });
    return sum;
  }

  var zoomed = null;

  // Zooms into frame `z`'s time range: it fills the chart's width; every frame of any thread
  // that ran in the range is drawn to the new scale (cut at the edges), the others hidden;
  // the frames below `z` on its thread (its callers) fill the width, faded.
  function zoom(z) {
    var a = z.X, b = z.X + z.W, scale = CHART / (b - a);
    var px = function (u) { return (X0 + (u - a) * scale) / 1000; };
    frames.forEach(function (f) {
      var inside = f.hit ? (f.X >= a && f.X < b) || f === z : f.X < b && f.X + f.T > a;
      var caller = f.lane === z.lane && f.y > z.y && f.X <= z.X && f.X + f.T >= z.X + z.T;
      hide(f.g, !inside && !caller);
      if (caller) f.g.setAttribute("opacity", "0.5");
      else f.g.removeAttribute("opacity");
      if (!inside && !caller) return;
      var left, w;
      if (caller || f === z) {
        left = x0;
        w = chart;
      } else if (f.hit) {
        left = px(f.X);
        w = k.hit;
      } else {
        left = px(Math.max(f.X, a));
        w = px(Math.min(f.X + f.T, b)) - left;
      }
      f.rect.setAttribute("x", left.toFixed(3));
      f.rect.setAttribute("width", w.toFixed(3));
      fit(f.label, left + 2, w - 4);
      f.moved = true;
    });
    lanes.forEach(function (lane) {
      // The label of a thread that ran in the window, from where it starts (or the left edge)
      // to where the next thread of its band starts.
      var left = Math.max(x0, px(lane.left)), right = Math.min(width, px(lane.right));
      if (lane.left < b && lane.end > a && right > left) fit(lane.label, left, right - left);
      else if (lane.label.el) lane.label.el.textContent = "";
      lane.ends.forEach(function (e) {
        hide(e.el, e.X < a || e.X > b);
        e.el.setAttribute("x1", px(e.X).toFixed(3));
        e.el.setAttribute("x2", px(e.X).toFixed(3));
      });
    });
    axis(a, b);
    hide(ticks, true);
    show(ctl.reset, true);
    zoomed = z;
  }

  // Back to the chart as drawn.
  function reset() {
    if (!zoomed) return;
    frames.forEach(function (f) {
      hide(f.g, false);
      f.g.removeAttribute("opacity");
      if (!f.moved) return;
      f.rect.setAttribute("x", f.x);
      f.rect.setAttribute("width", f.w);
      unfit(f.label);
      f.moved = false;
    });
    lanes.forEach(function (lane) {
      unfit(lane.label);
      lane.ends.forEach(function (e) {
        hide(e.el, false);
        e.el.setAttribute("x1", e.x);
        e.el.setAttribute("x2", e.x);
      });
    });
    zoomAxis.textContent = "";
    hide(ticks, false);
    show(ctl.reset, false);
    zoomed = null;
  }

  // The time axis of the window [a, b] (thousandths of a pixel): a tick every 1, 2 or 5 powers
  // of ten nanoseconds, as the writer's, labelled in the unit of the window's end.
  function axis(a, b) {
    var ns = function (u) { return (u - X0) * span / CHART; };
    var t0 = ns(a), t1 = ns(b), step = 1;
    for (;;) {
      var d = [1, 2, 5].find(function (d) { return step * d * 10 >= t1 - t0; });
      if (d) { step *= d; break; }
      step *= 10;
    }
    var unit = t1 >= 1e9 ? ["s", 1e9] : t1 >= 1e6 ? ["ms", 1e6] : t1 >= 1e3 ? ["µs", 1e3] : ["ns", 1];
    var decimals = 0;
    while (step * Math.pow(10, decimals) < unit[1]) decimals++;
    zoomAxis.textContent = "";
    for (var t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      var x = x0 + (t - t0) * chart / (t1 - t0);
      var line = document.createElementNS(NS, "line"), text = document.createElementNS(NS, "text");
      [["x1", x], ["x2", x], ["y1", k.axisY - 3], ["y2", k.gridBottom], ["stroke", "#ccc"],
        ["stroke-width", 0.5]].forEach(function (p) { line.setAttribute(p[0], p[1]); });
      var anchor = x < x0 + 30 ? "start" : x > x0 + chart - 30 ? "end" : "middle";
      [["x", x], ["y", k.axisY - 6], ["text-anchor", anchor], ["fill", "#333"]]
        .forEach(function (p) { text.setAttribute(p[0], p[1]); });
      text.textContent = (t / unit[1]).toFixed(decimals) + " " + unit[0];
      zoomAxis.appendChild(line);
      zoomAxis.appendChild(text);
    }
  }

  var pattern = "";

  // Highlights the frames whose names match `p` (a regular expression, or a plain text when it
  // is not one) and says the share of the threads' time they cover.
  function search(p) {
    var re = null;
    try { re = new RegExp(p); } catch (e) { re = null; }
    var matches = re ? function (s) { return re.test(s); } : function (s) { return s.indexOf(p) >= 0; };
    var matched = 0;
    lanes.forEach(function (lane) {
      var hits = lane.frames.filter(function (f) {
        var m = matches(f.name);
        f.rect.setAttribute("fill", m ? k.match : f.fill);
        return m;
      });
      matched += covered(hits);
    });
    pattern = p;
    ctl.matched.textContent = "Matched: " + (100 * matched / (total || 1)).toFixed(1) + "%";
    show(ctl.matched, true);
    show(ctl.clear, true);
  }

  function clearSearch() {
    frames.forEach(function (f) { f.rect.setAttribute("fill", f.fill); });
    ctl.matched.textContent = "";
    show(ctl.matched, false);
    show(ctl.clear, false);
  }

  function ask() {
    var p = window.prompt("Search the frames' names (a regular expression, or plain text)", pattern);
    if (p === null) return;
    if (p === "") clearSearch();
    else search(p);
  }

  var byElement = new Map(frames.map(function (f) { return [f.g, f]; }));
  svg.addEventListener("click", function (e) {
    var target = e.target;
    if (target.closest(".bp-search")) return ask();
    if (target.closest(".bp-clear")) return clearSearch();
    var g = target.closest("g.f");
    if (g && byElement.has(g)) zoom(byElement.get(g));
    else reset();
  });
  window.addEventListener("keydown", function (e) {
    if (((e.ctrlKey || e.metaKey) && e.key === "f") || (e.key === "/" && !e.ctrlKey && !e.metaKey)) {
      e.preventDefault();
      ask();
    } else if (e.key === "Escape") {
      reset();
      clearSearch();
    }
  });
  svg.classList.add("bp-live");
  show(ctl.search, true);
})
