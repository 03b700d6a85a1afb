// worqr dashboard: confirmations for actions, and live counts from the
// server's event stream. Everything from the server is set as text, never
// as markup.
(function () {
  "use strict";
  var body = document.body;
  var base = body.getAttribute("data-base") || "";
  var pageName = body.getAttribute("data-page");

  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!form.classList || !form.classList.contains("act")) return;
    // A form with several buttons (the bulk ones) asks the clicked one's question.
    var by = ev.submitter && ev.submitter.getAttribute("data-confirm");
    var msg = by || form.getAttribute("data-confirm") || "Are you sure?";
    if (!window.confirm(msg)) { ev.preventDefault(); return; }
    var c = form.querySelector("input[name=confirmed]");
    if (c) c.value = "yes";
  });

  if (pageName !== "overview" && pageName !== "queue") return;
  if (!window.EventSource) return;
  var live = document.getElementById("live");

  function cells(k, f) {
    return document.querySelectorAll('[data-k="' + k + '"][data-f="' + f + '"]');
  }
  function setText(k, f, text) {
    cells(k, f).forEach(function (el) {
      if (el.textContent !== text) {
        el.textContent = text;
        el.classList.remove("changed"); void el.offsetWidth; el.classList.add("changed");
      }
    });
  }
  function spark(k, values) {
    cells(k, "spark").forEach(function (svg) {
      var line = svg.querySelector("polyline");
      if (!line) return;
      var maxV = Math.max.apply(null, values.concat([1]));
      var pts = values.map(function (v, i) {
        var x = values.length > 1 ? (i * 120) / (values.length - 1) : 0;
        var y = 23 - (v / maxV) * 22;
        return x.toFixed(1) + "," + y.toFixed(1);
      });
      line.setAttribute("points", pts.join(" "));
    });
  }
  function addRow(q) {
    var tbody = document.querySelector("#queues tbody");
    if (!tbody) return;
    var none = document.getElementById("noqueues");
    if (none) none.remove();
    var tr = document.createElement("tr");
    tr.setAttribute("data-row", q.k);
    var td = document.createElement("td");
    var a = document.createElement("a");
    a.href = base + "/queue?q=" + encodeURIComponent(q.k);
    td.className = "qname";
    a.textContent = q.name;
    a.className = "clamp";
    a.title = q.name;
    td.appendChild(a);
    tr.appendChild(td);
    ["waiting", "delayed", "inFlight", "dead", "paused", "limit", "rate"].forEach(function (f) {
      var c = document.createElement("td");
      c.className = (f !== "paused" ? "n" : "") + (f === "paused" || f === "limit" ? " wide" : "");
      c.setAttribute("data-k", q.k);
      c.setAttribute("data-f", f);
      tr.appendChild(c);
    });
    var st = document.createElement("td");
    st.className = "wide";
    var svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("class", "spark");
    svg.setAttribute("viewBox", "0 0 120 24");
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("data-k", q.k);
    svg.setAttribute("data-f", "spark");
    svg.appendChild(document.createElementNS("http://www.w3.org/2000/svg", "polyline"));
    st.appendChild(svg);
    tr.appendChild(st);
    // Rows sort by name: their hex keys sort as the names' bytes do.
    var after = null;
    tbody.querySelectorAll("tr[data-row]").forEach(function (row) {
      if (!after && row.getAttribute("data-row") > q.k) after = row;
    });
    tbody.insertBefore(tr, after);
  }

  var es = new EventSource(base + "/events");
  es.addEventListener("counts", function (m) {
    var ev;
    try { ev = JSON.parse(m.data); } catch (e) { return; }
    var seen = {};
    (ev.queues || []).forEach(function (q) {
      seen[q.k] = true;
      if (pageName === "overview" && !document.querySelector('tr[data-row="' + q.k + '"]')) addRow(q);
      ["waiting", "delayed", "inFlight", "weight", "dead"].forEach(function (f) { setText(q.k, f, String(q[f])); });
      setText(q.k, "paused", q.paused ? "paused" : (pageName === "queue" ? "running" : ""));
      setText(q.k, "limit", q.limit ? String(q.limit) : "—");
      setText(q.k, "rate", q.rate.toFixed(1));
      spark(q.k, q.spark || []);
    });
    if (pageName === "overview" && !ev.error) {
      document.querySelectorAll("tr[data-row]").forEach(function (tr) {
        tr.classList.toggle("gone", !seen[tr.getAttribute("data-row")]);
      });
    }
    if (live) {
      live.textContent = ev.error ? "error: " + ev.error : "live · " + new Date(ev.at).toLocaleTimeString();
      live.classList.toggle("bad", !!ev.error);
      live.setAttribute("data-at", String(ev.at));
    }
  });
  es.onerror = function () {
    if (!live) return;
    // A stream refused (too many open) is closed, never retried.
    live.textContent = es.readyState === EventSource.CLOSED ? "no live counts: reload later" : "reconnecting…";
    live.classList.add("bad");
  };
})();
