// Transcript browser: filters, search and pages over the packed transcripts.
// Every text from the run reaches the page through textContent only: model replies are untrusted.
(function () {
  "use strict";
  var PAGE = 50;
  var KINDS = ["rules", "reply", "notice", "verdict", "prompt"];
  var FAILURES = ["invalid reply", "timeout", "error"];
  var REFEREE = "Referee";
  var OUTCOMES = { decided: "decided", tie: "tie", scored: "scored" };
  if (!document.getElementById("matches")) {  // a report of reviews files, or of a run with no match yet
    document.body.dataset.ready = "1";
    return;
  }
  var data = JSON.parse(document.getElementById("arena-transcripts").textContent);
  var S = data.strings, M = data.matches, AUD = data.audiences;
  var lower = null;  // lower-cased strings, built on the first search
  var state = { group: "", agent: "", outcome: "", query: "", page: 0, seen: false };
  var shown = [];
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function str(i) { return i < 0 ? null : S[i]; }
  function agentOf(m, i) { return data.agents[m.seats[i][2]]; }
  function seatIndex(m, label) {
    for (var i = 0; i < m.seats.length; i++) if (S[m.seats[i][0]] === label) return i;
    return -1;
  }
  function num(v) { return v === null || v === undefined ? "—" : (Math.round(v * 1000) / 1000).toString(); }

  // -- filtering ---------------------------------------------------------------------
  function hasAgent(m, agent) {
    for (var i = 0; i < m.seats.length; i++) if (data.agents[m.seats[i][2]] === agent) return true;
    return false;
  }
  function won(m, agent) {
    for (var i = 0; i < m.w.length; i++) if (agentOf(m, m.w[i]) === agent) return true;
    return false;
  }
  function textIds(m) {
    var ids = [];
    m.m.forEach(function (x) { ids.push(x[3]); if (x[5] >= 0) ids.push(x[5]); if (x[6] >= 0) ids.push(x[6]); });
    m.f.forEach(function (x) { if (x[4] >= 0) ids.push(x[4]); ids.push(x[5]); });
    m.a.forEach(function (x) { ids.push(x[2]); });
    if (m.e >= 0) ids.push(m.e);
    return ids;
  }
  function searchHit(m, q, hits) {
    if (m.k.toLowerCase().indexOf(q) >= 0) return true;
    for (var i = 0; i < m.seats.length; i++) if (agentOf(m, i).toLowerCase().indexOf(q) >= 0) return true;
    var ids = textIds(m);
    for (var j = 0; j < ids.length; j++) {
      var id = ids[j];
      if (hits[id] === 0) hits[id] = lower[id].indexOf(q) >= 0 ? 1 : 2;  // each distinct text is tested once
      if (hits[id] === 1) return true;
    }
    return false;
  }
  function filter() {
    var q = state.query.toLowerCase(), hits = null;
    if (q) {
      if (!lower) lower = S.map(function (s) { return s.toLowerCase(); });
      hits = new Uint8Array(S.length);
    }
    var group = state.group === "" ? -1 : Number(state.group), out = [];
    for (var i = 0; i < M.length; i++) {
      var m = M[i];
      if (group >= 0 && m.g !== group) continue;
      if (state.agent && !hasAgent(m, state.agent)) continue;
      var o = state.outcome;
      if (o === "decided" || o === "tie" || o === "scored" || o === "failed" || o === "truncated" || o === "interrupted") { if (m.o !== o) continue; }
      else if (o === "invalid") { if (!m.n && !m.f.length) continue; }
      else if (o === "won") { if (!state.agent || !won(m, state.agent)) continue; }
      else if (o === "lost") { if (!state.agent || (m.o !== "decided" && m.o !== "tie" && m.o !== "scored") || won(m, state.agent)) continue; }
      if (q && !searchHit(m, q, hits)) continue;
      out.push(i);
    }
    return out;
  }

  // -- rendering -----------------------------------------------------------------------
  function highlighted(tag, cls, text) {
    var node = el(tag, cls);
    var q = state.query;
    if (!q) { node.textContent = text; return node; }
    var low = text.toLowerCase(), ql = q.toLowerCase(), at = 0, found;
    if (low.length !== text.length) { node.textContent = text; return node; }  // offsets would not line up
    while ((found = low.indexOf(ql, at)) >= 0) {
      node.appendChild(document.createTextNode(text.slice(at, found)));
      node.appendChild(el("mark", null, text.slice(found, found + q.length)));
      at = found + q.length;
    }
    node.appendChild(document.createTextNode(text.slice(at)));
    return node;
  }
  function who(m, label) {
    var span = el("span", "who", label);
    var i = seatIndex(m, label);
    if (i >= 0 && !state.seen) span.appendChild(el("span", "agent", " (" + agentOf(m, i) + ")"));
    return span;
  }
  function audience(m, msg) {
    var sender = S[msg[1]];
    var others = AUD[msg[4]].map(function (i) { return S[i]; }).filter(function (s) { return s !== sender; });
    if (sender !== REFEREE) return others.length ? "seen by " + others.join(", ") : "seen by no other seat";
    if (!others.length) return "for the record, to no seat";
    var everyone = others.length === m.seats.length && m.seats.length > 1;
    return everyone ? "to everyone (" + others.join(", ") + ")" : "to " + others.join(", ");
  }
  function renderMessage(m, msg) {
    var sender = S[msg[1]], referee = sender === REFEREE;
    var verdict = KINDS[msg[2]] === "verdict" || (referee && AUD[msg[4]].length === 0);  // kept for the record
    var box = el("div", "msg " + KINDS[msg[2]] + (referee ? " referee" : " seat") + (verdict ? " verdict" : ""));
    var head = el("div");
    head.appendChild(who(m, sender));
    head.appendChild(el("span", "badge " + (verdict ? "verdict" : KINDS[msg[2]]), verdict ? "verdict" : KINDS[msg[2]]));
    head.appendChild(el("span", "audience", audience(m, msg)));
    // as the seats saw it: the audience's version, when the filter changed it (its sender had its own words back)
    var filtered = state.seen && msg[6] >= 0;
    if (filtered) head.appendChild(el("span", "badge scrubbed", "names withheld"));
    box.appendChild(head);
    box.appendChild(highlighted("div", "text", S[filtered ? msg[6] : msg[3]]));
    if (msg[5] >= 0) {
      var more = el("details");
      more.appendChild(el("summary", null, "recorded data"));
      more.appendChild(highlighted("div", "text", S[msg[5]]));
      box.appendChild(more);
    }
    return box;
  }
  function renderFailure(m, f) {
    var box = el("div", "msg fail");
    var head = el("div");
    head.appendChild(el("span", null, "✗ "));
    head.appendChild(who(m, S[f[1]]));
    head.appendChild(el("span", "badge invalid", FAILURES[f[3]]));
    head.appendChild(el("span", "audience", "attempt " + (f[2] + 1) + "; " + S[f[5]]));
    box.appendChild(head);
    box.appendChild(highlighted("div", "text", f[4] >= 0 ? S[f[4]] : "(no reply)"));
    return box;
  }
  function renderAction(m, a) {
    var box = el("div", "msg action" + (a[3] ? " defaulted" : ""));
    box.appendChild(el("span", null, "→ "));
    box.appendChild(who(m, S[a[1]]));
    box.appendChild(el("span", null, " action: "));
    box.appendChild(highlighted("span", "value", S[a[2]]));
    if (a[3]) box.appendChild(el("span", "badge default", "default after " + a[4] + " attempts"));
    return box;
  }
  function renderBody(m, into) {
    var group = data.groups[m.g];
    var info = el("div", "note", group.game + " · entry " + group.name + " · repeat " + m.rep +
      " · seed " + m.seed + " · " + m.st + " · " + m.r + " rounds" +
      (group.contest ? "" : " · not a contest (the payoffs do not share out a fixed total): no seat wins"));
    into.appendChild(info);
    var seats = el("table");
    var hr = el("tr");
    var heads = state.seen ? ["Seat", "Role", "Payoff"] : ["Seat", "Role", "Agent", "Payoff"];
    heads.forEach(function (h) { hr.appendChild(el("th", null, h)); });
    seats.appendChild(hr);
    m.seats.forEach(function (s, i) {
      var tr = el("tr", m.w.indexOf(i) >= 0 ? "winner" : "");
      var cells = state.seen ? [S[s[0]], S[s[1]], num(m.p[i])] : [S[s[0]], S[s[1]], data.agents[s[2]], num(m.p[i])];
      cells.forEach(function (v) { tr.appendChild(el("td", null, v)); });
      seats.appendChild(tr);
    });
    into.appendChild(seats);
    var rounds = {};
    function at(r) { return rounds[r] || (rounds[r] = { f: [], m: [], a: [], x: [] }); }
    m.f.forEach(function (f) { at(f[0]).f.push(f); });
    m.m.forEach(function (x) { at(x[0]).m.push(x); });
    m.a.forEach(function (a) { at(a[0]).a.push(a); });
    m.x.forEach(function (x) { at(x[0]).x.push(x); });
    Object.keys(rounds).map(Number).sort(function (a, b) { return a - b; }).forEach(function (r) {
      into.appendChild(el("div", "round", "Round " + r + (r === 0 ? " (rules)" : "")));
      var R = rounds[r];
      if (state.seen) {  // the messages only, as their audience got them: the rest is the record's, and names names
        R.m.forEach(function (x) { into.appendChild(renderMessage(m, x)); });
        return;
      }
      R.f.forEach(function (f) { into.appendChild(renderFailure(m, f)); });
      R.m.forEach(function (x) { into.appendChild(renderMessage(m, x)); });
      R.x.forEach(function (x) {
        into.appendChild(el("div", "msg fail", "anonymity filter: removed " + S[x[2]] + " from " + S[x[1]] + "'s words"));
      });
      R.a.forEach(function (a) { into.appendChild(renderAction(m, a)); });
    });
    if (m.e >= 0) into.appendChild(highlighted("div", "error", state.seen ? m.st + " (the record view says why)" : m.st + ": " + S[m.e]));
    else if (m.st === "truncated") {
      into.appendChild(el("div", "error", "truncated: stopped at max_rounds after " + m.r + " rounds, before the game " +
        "ended; scored where it stopped, and left out of the results"));
    } else if (m.st === "finished") {
      into.appendChild(el("div", "payoffs", "payoffs: " + m.seats.map(function (s, i) {
        return S[s[0]] + (state.seen ? "" : " (" + data.agents[s[2]] + ")") + " " + num(m.p[i]);
      }).join(", ")));
    }
  }
  function renderSummary(m, index) {
    var summary = el("summary");
    // a match's key names its agents: the seats' view goes by entry and repeat instead
    summary.appendChild(el("span", "key", state.seen ? "repeat " + m.rep + " · match " + (index + 1) : m.k));
    summary.appendChild(el("span", "badge", data.groups[m.g].name));
    if (m.st !== "finished") summary.appendChild(el("span", "badge " + m.st, m.st));
    else summary.appendChild(el("span", "badge outcome " + m.o, OUTCOMES[m.o]));
    if (m.n) summary.appendChild(el("span", "badge invalid", m.n + " invalid " + (m.n === 1 ? "reply" : "replies")));
    var defaulted = m.a.filter(function (a) { return a[3]; }).length;
    if (defaulted) summary.appendChild(el("span", "badge default", defaulted + " defaulted"));
    var seats = el("div", "seats");
    m.seats.forEach(function (s, i) {
      if (i) seats.appendChild(document.createTextNode(" · "));
      var span = el("span", m.w.indexOf(i) >= 0 ? "winner" : "", S[s[0]] + (state.seen ? "" : ": " + data.agents[s[2]]) +
        (m.p[i] === null || m.p[i] === undefined ? "" : " " + num(m.p[i])));
      seats.appendChild(span);
    });
    summary.appendChild(seats);
    return summary;
  }
  function renderMatch(index) {
    var m = M[index];
    var box = el("details", "match");
    box.dataset.key = m.k;
    box.dataset.index = String(index);
    box.appendChild(renderSummary(m, index));
    var body = el("div", "body");
    box.appendChild(body);
    function draw() { if (!body.hasChildNodes()) renderBody(m, body); }  // transcripts are drawn only when opened
    // on the click itself, so the transcript is there when the box opens; toggle covers opening by script
    box.firstChild.addEventListener("click", draw);
    box.addEventListener("toggle", function () { if (box.open) draw(); });
    return box;
  }
  function renderPager(node, pages) {
    node.textContent = "";
    var prev = el("button", null, "‹ previous"), next = el("button", null, "next ›");
    prev.type = next.type = "button";
    prev.disabled = state.page <= 0;
    next.disabled = state.page >= pages - 1;
    prev.addEventListener("click", function () { go(state.page - 1); });
    next.addEventListener("click", function () { go(state.page + 1); });
    node.appendChild(prev);
    node.appendChild(el("span", "page-info", shown.length ? "page " + (state.page + 1) + " of " + pages +
      " · " + shown.length + " of " + M.length + " matches" : "no match of " + M.length + " fits"));
    node.appendChild(next);
  }
  function render() {
    var list = $("matches"), pages = Math.max(1, Math.ceil(shown.length / PAGE));
    state.page = Math.min(Math.max(0, state.page), pages - 1);
    list.textContent = "";
    var start = state.page * PAGE;
    shown.slice(start, start + PAGE).forEach(function (i) { list.appendChild(renderMatch(i)); });
    renderPager($("pager-top"), pages);
    renderPager($("pager-bottom"), pages);
  }
  function go(page) { state.page = page; render(); }
  function refresh() {
    shown = filter();
    state.page = 0;
    render();
    document.body.dataset.query = state.query;  // lets a test or a script know the list is up to date
    document.body.dataset.shown = String(shown.length);
  }

  // -- controls --------------------------------------------------------------------------
  function options(select, items) {
    items.forEach(function (item) {
      var o = el("option", null, item.label);
      o.value = item.value;
      select.appendChild(o);
    });
  }
  options($("f-group"), data.groups.map(function (g, i) {
    return { value: String(i), label: g.name === g.game ? g.name : g.name + " (" + g.game + ")" };
  }));
  options($("f-agent"), data.agents.slice().sort().map(function (a) { return { value: a, label: a }; }));
  $("f-group").addEventListener("change", function (e) { state.group = e.target.value; refresh(); });
  $("f-agent").addEventListener("change", function (e) { state.agent = e.target.value; refresh(); });
  $("f-outcome").addEventListener("change", function (e) { state.outcome = e.target.value; refresh(); });
  var timer = null;
  $("f-text").addEventListener("input", function (e) {
    clearTimeout(timer);
    timer = setTimeout(function () { state.query = e.target.value.trim(); refresh(); }, 150);
  });
  $("f-seen").addEventListener("change", function (e) {
    state.seen = e.target.checked;
    var open = {};  // the page is drawn again in the new view, with the same transcripts open
    Array.prototype.forEach.call(document.querySelectorAll("#matches details.match[open]"), function (box) {
      open[box.dataset.key] = true;
    });
    render();
    Array.prototype.forEach.call(document.querySelectorAll("#matches details.match"), function (box) {
      if (!open[box.dataset.key]) return;
      renderBody(M[Number(box.dataset.index)], box.querySelector(".body"));
      box.open = true;
    });
    document.body.dataset.seen = state.seen ? "1" : "0";
  });
  $("filters").addEventListener("submit", function (e) { e.preventDefault(); });
  refresh();
  document.body.dataset.ready = "1";
})();
