// evalsuite report: the divergent-sample browser and side-by-side viewer.
// Reads the inlined JSON, renders with textContent only (model output is never parsed as HTML).
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("evalsuite-data").textContent);
  var samples = data.samples;
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "cls") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(c); });
    return node;
  }
  function fmt(x, digits) { return x === null || x === undefined ? "–" : Number(x).toPrecision(digits || 3); }
  function gapText(s) {
    if (s.gap === null || s.gap === undefined) return "–";
    return (s.gap_bound ? "≥ " : "") + fmt(s.gap) + (s.gap_source === "candidate" ? " (candidate)" : "");
  }

  function fillSelect(select, values) {
    values.forEach(function (v) { select.appendChild(el("option", { value: v, text: v })); });
  }
  fillSelect($("f-task"), data.tasks);
  fillSelect($("f-stratum"), data.strata);

  function matches(s) {
    var task = $("f-task").value, stratum = $("f-stratum").value;
    if (task && s.task !== task) return false;
    if (stratum) {
      var kv = stratum.split("=");
      if (s.strata[kv[0]] !== kv.slice(1).join("=")) return false;
    }
    if ($("f-confident").checked && s.kind !== "confident") return false;
    if ($("f-flipped").checked && s.flipped !== true) return false;
    return true;
  }

  function renderList() {
    var body = document.querySelector("#sample-list tbody");
    body.textContent = "";
    var shown = samples.filter(matches);
    shown.forEach(function (s) {
      var row = el("tr", { "data-key": s.key, tabindex: "0" }, [
        el("td", { text: s.key }),
        el("td", {}, [el("span", { cls: "kind " + s.kind, text: s.kind })]),
        el("td", { text: String(s.pos) }),
        el("td", { text: gapText(s) }),
        el("td", { text: fmt(s.margin) }),
        el("td", { text: s.flipped ? "flipped" : (s.answer_changed ? "answer changed" : "") })
      ]);
      row.addEventListener("click", function () { openSample(s.key); });
      row.addEventListener("keydown", function (e) { if (e.key === "Enter") openSample(s.key); });
      body.appendChild(row);
    });
    $("f-count").textContent = shown.length + " of " + samples.length + " shown";
  }

  function tokens(arm, s) {
    var box = el("div", { cls: "tokens" });
    arm.tokens.forEach(function (t, i) {
      var at = s.start + i;
      var cls = "tok" + (at === s.pos ? " first" : at > s.pos ? " after" : "") + (t[2] ? "" : " nolp");
      var tip = "position " + at + (t[1] === null ? (t[2] ? "" : ": accepted draft token, no logprobs") : ": logprob " + fmt(t[1], 4));
      box.appendChild(el("span", { cls: cls, title: tip, text: t[0] }));
    });
    if (!arm.tokens.length && s.level === "text") box.appendChild(el("span", { cls: "tok first", text: arm.tail.slice(0, 1) }));
    return box;
  }

  function alternatives(arm, name, s) {
    if (!arm.alternatives.length) return el("p", { cls: "note", text: name + ": no alternatives reported at the divergence (an accepted draft token, or no logprobs)." });
    var rows = arm.alternatives.map(function (a, i) {
      return el("tr", {}, [el("td", { text: String(i + 1) }), el("td", {}, [el("code", { text: JSON.stringify(a[0]) })]), el("td", { text: fmt(a[1], 4) })]);
    });
    return el("table", { cls: "alts" }, [el("caption", { text: name + " top alternatives at position " + s.pos }),
      el("thead", {}, [el("tr", {}, [el("th", { text: "rank" }), el("th", { text: "token" }), el("th", { text: "logprob" })])]),
      el("tbody", {}, rows)]);
  }
  function grade(g) {
    if (!g) return [el("td", { text: "–" }), el("td", { text: "–" }), el("td", { text: "" })];
    return [el("td", {}, [el("span", { cls: "grade " + g.status, text: g.status })]), el("td", {}, [el("code", { text: g.extracted === null ? "(none)" : g.extracted })]), el("td", { text: g.reason })];
  }

  function column(name, arm, s) {
    return el("div", { cls: "arm " + name }, [
      el("h4", { text: name + " (" + arm.length + (s.level === "text" ? " characters)" : " tokens)") }),
      tokens(arm, s),
      (arm.tail.length > (s.level === "text" ? 1 : 0)) ? el("pre", { cls: "tail", text: (s.level === "text" ? arm.tail.slice(1) : arm.tail) + (arm.clipped ? " … [" + arm.clipped + " more characters]" : "") }) : null,
      alternatives(arm, name, s)
    ]);
  }

  function openSample(key) {
    var s = samples.filter(function (x) { return x.key === key; })[0];
    var view = $("sample-view");
    if (!s) return;
    view.textContent = "";
    document.querySelectorAll("#sample-list tr.selected").forEach(function (r) { r.classList.remove("selected"); });
    var row = document.querySelector('#sample-list tr[data-key="' + CSS.escape(key) + '"]');
    if (row) row.classList.add("selected");
    var strata = Object.keys(s.strata).map(function (k) { return k + " = " + s.strata[k]; }).join(", ");
    var why = s.explained_by ? " (explained by " + s.explained_by + ")" : "";
    view.appendChild(el("h3", { text: s.key }));
    view.appendChild(el("p", {}, [el("span", { cls: "kind " + s.kind, text: s.kind }),
      el("span", { text: " first divergence at " + (s.level === "text" ? "character " : "token ") + s.pos + why +
        "; the tokens chosen are " + gapText(s) + " nats apart (threshold " + fmt(data.thresholds[s.task]) +
        "; the baseline's top two " + fmt(s.margin) + " nats apart)" +
        (s.candidate_rank ? "; the candidate's token was the baseline's choice #" + s.candidate_rank : "") +
        (s.ended ? "; the " + s.ended + " output ended there" : "") + (strata ? " · " + strata : "") })]));
    if (s.prompt) view.appendChild(el("details", {}, [el("summary", { text: "prompt" }), el("pre", { text: s.prompt })]));
    view.appendChild(el("table", { cls: "grades" }, [
      el("thead", {}, [el("tr", {}, [el("th", { text: "" }), el("th", { text: "grade" }), el("th", { text: "extracted answer" }), el("th", { text: "reason" })])]),
      el("tbody", {}, [el("tr", {}, [el("th", { text: "baseline" })].concat(grade(s.grades.baseline))),
        el("tr", {}, [el("th", { text: "candidate" })].concat(grade(s.grades.candidate)))])]));
    if (s.reference !== null) view.appendChild(el("p", { cls: "note", text: "reference: " + s.reference }));
    view.appendChild(el("pre", { cls: "prefix", text: (s.prefix_clipped ? "[" + s.prefix_clipped + " earlier characters] … " : "") + s.prefix }));
    view.appendChild(el("div", { cls: "sides" }, [column("baseline", s.baseline, s), column("candidate", s.candidate, s)]));
    view.hidden = false;
    if (location.hash !== "#sample=" + encodeURIComponent(key)) history.replaceState(null, "", "#sample=" + encodeURIComponent(key));
  }

  ["f-task", "f-stratum", "f-confident", "f-flipped"].forEach(function (id) { $(id).addEventListener("change", renderList); });
  renderList();
  var m = /^#sample=(.+)$/.exec(location.hash);
  if (m) openSample(decodeURIComponent(m[1]));
  window.evalsuiteOpenSample = openSample;
})();
