// Drives the flame chart inlined above it in the page (see flamechart_script.rs): runs STEPS in
// order and, after each, records every frame's state, then writes the record as JSON into
// <pre id="result"> for `chromium --dump-dom` to print. A step is ["frame", NAME, N] (a click
// on the Nth frame named NAME, in document order), ["key", KEY, CTRL], ["control", SELECTOR]
// (a click on it), ["background"] (a click on the chart's background) or ["prompt", ANSWER]
// (what window.prompt answers from then on).
(function (steps) {
  var svg = document.querySelector("svg");
  var chart = svg.cloneNode(true);
  function state() {
    var matched = svg.querySelector(".bp-matched");
    return {
      // [display, opacity, x, width, fill, label x, label] of each frame, in document order.
      frames: Array.from(svg.querySelectorAll("g.f")).map(function (g) {
        var r = g.querySelector("rect"), t = g.querySelector("text");
        return [g.getAttribute("display"), g.getAttribute("opacity"), r.getAttribute("x"),
          r.getAttribute("width"), r.getAttribute("fill"), t && t.getAttribute("x"),
          t && t.textContent];
      }),
      // The label of each thread.
      lanes: Array.from(svg.querySelectorAll("g.lane")).map(function (g) {
        var t = g.querySelector(":scope > text.lbl");
        return t && t.textContent;
      }),
      reset: svg.querySelector(".bp-reset").getAttribute("visibility") !== "hidden",
      search: svg.querySelector(".bp-search").getAttribute("visibility") !== "hidden",
      matched: matched.getAttribute("visibility") !== "hidden" ? matched.textContent : null,
      ticks: Array.from(svg.querySelectorAll(".bp-zoomaxis text")).map(function (t) {
        return t.textContent;
      }),
      // Whether the whole chart is as it was before the first step (attributes in any order).
      same: svg.isEqualNode(chart),
      errors: window.bpErrors.slice(),
    };
  }
  function frame(name, n) {
    var g = Array.from(svg.querySelectorAll("g.f")).filter(function (g) {
      var title = g.querySelector("title").textContent;
      return title.slice(0, title.lastIndexOf(" (")) === name;
    })[n];
    if (!g) throw new Error("no frame " + n + " named " + name);
    return g.querySelector("rect");
  }
  function click(el) {
    el.dispatchEvent(new MouseEvent("click", { bubbles: true }));
  }
  var out = [state()];
  try {
    steps.forEach(function (s) {
      if (s[0] === "frame") click(frame(s[1], s[2]));
      else if (s[0] === "key") {
        window.dispatchEvent(new KeyboardEvent("keydown", { key: s[1], ctrlKey: s[2] }));
      } else if (s[0] === "control") click(svg.querySelector(s[1]));
      else if (s[0] === "background") click(svg.querySelector("rect"));
      else if (s[0] === "prompt") window.prompt = function () { return s[1]; };
      else throw new Error("unknown step " + s[0]);
      out.push(state());
    });
  } catch (e) {
    out = { error: String(e) };
  }
  document.getElementById("result").textContent = JSON.stringify(out);
})
