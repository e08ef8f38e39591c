// The operator's page: fetches api/state every few seconds and draws it. Plain JS and
// SVG, nothing loaded from elsewhere. Every drawn element that a test reads carries
// data-* attributes (data-server, data-job, data-kind) beside the text people read.
"use strict";
const REFRESH_MS = 5000;
const SVG = "http://www.w3.org/2000/svg";
const STATES = ["training", "serving", "draining", "reclaiming", "lent", "idle"];

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) e.setAttribute(k, v);
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k === null || k === undefined ? "" : String(k)));
  return e;
}
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function slotClass(state) { return STATES.includes(state) ? "s-" + state : "s-other"; }
function dur(s) {
  if (s === null || s === undefined) return "–";
  s = Math.max(0, s);
  if (s < 60) return s.toFixed(0) + " s";
  if (s < 3600) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}
function num(x, d) { return x === null || x === undefined ? "–" : Number(x).toFixed(d); }
function clock(t) { return new Date(t * 1000).toLocaleTimeString([], {hour: "2-digit", minute: "2-digit", second: "2-digit"}); }
function table(headers, rows) {
  if (!rows.length) return el("p", {class: "muted"}, "none");
  const t = el("table", {}, el("tr", {}, ...headers.map(h => el("th", {}, h))));
  for (const r of rows) t.append(r);
  return el("div", {class: "wrap"}, t);
}
function link(href, text) { return href ? el("a", {href: href, target: "_blank", rel: "noopener"}, text) : el("span", {class: "muted"}, "–"); }
function fill(id, ...kids) { const n = document.getElementById(id); n.replaceChildren(...kids); }

function drawGpus(servers) {
  // One row per server, grouped by pool then GPU type; one square per GPU.
  const order = [...servers].sort((a, b) => (a.pool + a.gpu_type + a.id).localeCompare(b.pool + b.gpu_type + b.id));
  const cell = 18, labelW = 250, rowH = 24;
  let maxG = 1; for (const s of order) maxG = Math.max(maxG, s.gpus);
  const groups = []; let last = null;
  for (const s of order) { const key = s.pool + " · " + s.gpu_type; if (key !== last) { groups.push(key); last = key; } }
  const h = rowH * (order.length + groups.length) + 8;
  const w = labelW + maxG * (cell + 3) + 10;
  const root = svg("svg", {viewBox: `0 0 ${w} ${h}`, width: w, height: h, role: "img", "aria-label": "GPUs by pool and type"});
  let y = 4; last = null;
  for (const s of order) {
    const key = s.pool + " · " + s.gpu_type;
    if (key !== last) { root.append(svg("text", {x: 0, y: y + 14, "font-weight": "600"}, key + " pool")); y += rowH; last = key; }
    const g = svg("g", {"data-server": s.id, "data-state": s.state, class: "server"});
    g.append(svg("text", {x: 12, y: y + 13}, `${s.short}  ${s.gpu_type} ×${s.gpus}  ${s.state}`));
    s.slots.forEach((slot, i) => {
      const cls = slotClass(slot.state) + (slot.state === "lent" && !slot.job ? " unused" : "");
      const r = svg("rect", {x: labelW + i * (cell + 3), y: y, width: cell, height: cell, rx: 3, class: cls, "data-slot": slot.state});
      r.append(svg("title", {}, slot.job_name ? `${slot.state}: ${slot.job_name} (${slot.job})` : slot.state + (slot.state === "lent" ? ", no job on it yet" : "")));
      g.append(r);
    });
    root.append(g); y += rowH;
  }
  const legend = el("div", {class: "muted"}, ...[...STATES, "free or others'"].flatMap(st => [el("span", {class: "swatch " + slotClass(st)}), st]));
  fill("gpus", root, legend);
  fill("servers", ...order.map(s => el("li", {"data-server": s.id}, `${s.short} · ${s.pool} · ${s.gpu_type} · `, el("b", {class: "state"}, s.state))));
}

function progress(p) {
  const w = 120, root = svg("svg", {width: w, height: 12, viewBox: `0 0 ${w} 12`, role: "img", "aria-label": `${Math.round(p * 100)} %`});
  root.append(svg("rect", {x: 0, y: 1, width: w, height: 10, rx: 3, class: "bar-bg"}));
  root.append(svg("rect", {x: 0, y: 1, width: Math.max(0, Math.min(1, p)) * w, height: 10, rx: 3, class: "bar"}));
  return root;
}
function jobCells(j) {
  return [el("td", {}, j.name, el("br"), el("code", {}, j.id)), el("td", {}, j.user || "–"), el("td", {class: "job-status"}, j.status)];
}
function rayCells(j) {
  return el("td", {}, j.ray_job ? link(j.links.ray_job, "Ray job " + j.ray_job) : el("span", {class: "muted"}, "not from a Ray job"),
    el("br"), link(j.links.train_run, "Train run " + j.train_run), " · ", link(j.links.logs, "logs"));
}
function drawQueue(q) {
  fill("queue", table(["job", "user", "state", "why it waits", "waited", "Ray"], q.map(j =>
    el("tr", {"data-job": j.id}, ...jobCells(j), el("td", {class: "job-reason"}, j.reason || "–"), el("td", {}, dur(j.waited_s)), rayCells(j)))));
}
function drawRunning(rs) {
  fill("running", table(["job", "user", "state", "progress", "GPUs", "resizes / preemptions", "shares with", "Ray"], rs.map(j => {
    const gpus = `${j.workers} × ${j.gpu_type}` + (j.extra ? " + " + j.extra.map(([t, n]) => `${n} × ${t}`).join(" + ") : "");
    const nodes = j.nodes.map(([n, g]) => `${n}:${g}`).join(" ");
    const sizes = j.runs.map(r => r.workers).join(" → ");
    return el("tr", {"data-job": j.id}, ...jobCells(j),
      el("td", {}, progress(j.progress), el("br"), `${num(j.steps_done, 0)} / ${num(j.total_steps, 0)} steps`),
      el("td", {}, gpus, el("br"), el("span", {class: "muted"}, nodes)),
      el("td", {}, `${j.resizes} / ${j.preemptions}`, el("br"), el("span", {class: "muted"}, sizes ? "sizes " + sizes : "")),
      el("td", {}, j.partner || "–"), rayCells(j));
  })));
}
function drawEnded(rs) {
  fill("ended", table(["job", "user", "state", "steps", "resizes / preemptions", "Ray"], rs.map(j =>
    el("tr", {"data-job": j.id}, ...jobCells(j), el("td", {}, `${num(j.steps_done, 0)} / ${num(j.total_steps, 0)}`),
      el("td", {}, `${j.resizes} / ${j.preemptions}`), rayCells(j)))));
}
function drawLoans(loans, servers, now) {
  // A timeline over the window: one row per inference server, a mark per lend/reclaim.
  const names = [...new Set([...servers.filter(s => s.pool === "inference").map(s => s.id), ...loans.events.map(e => e.node)])];
  // The axis spans the recorded events up to now (at least 3 minutes, at most the window).
  const first = loans.events.length ? loans.events[0].at : now - 180;
  const span = Math.min(loans.window_s, Math.max(180, (now - first) * 1.15));
  const start = now - span;
  const w = 1000, left = 90, rowH = 22, top = 8, h = top + rowH * Math.max(1, names.length) + 26;
  const x = t => left + (w - left - 30) * (t - start) / span;
  const root = svg("svg", {viewBox: `0 0 ${w} ${h}`, width: "100%", class: "chart", role: "img", "aria-label": "loans and reclaims", id: "loan-chart"});
  names.forEach((n, i) => {
    const y = top + i * rowH + rowH / 2;
    root.append(svg("text", {x: 0, y: y + 4}, n.slice(0, 8)));
    root.append(svg("line", {x1: left, x2: w - 10, y1: y, y2: y, stroke: "#d0d5dd"}));
  });
  const axisY = top + rowH * Math.max(1, names.length) + 14;
  for (let k = 0; k <= 6; k++) {
    const t = start + k * span / 6;
    root.append(svg("text", {x: x(t) - 24, y: axisY}, k === 6 ? "now" : clock(t)));
  }
  for (const e of loans.events) {
    const i = names.indexOf(e.node), y = top + i * rowH + rowH / 2;
    const mark = e.kind === "lend"
      ? svg("path", {d: `M ${x(e.at) - 6} ${y - 6} L ${x(e.at) + 6} ${y - 6} L ${x(e.at)} ${y + 6} Z`, class: "k-lend"})
      : svg("circle", {cx: x(e.at), cy: y, r: 6, class: "k-reclaim"});
    mark.setAttribute("data-kind", e.kind); mark.setAttribute("data-node", e.node); mark.setAttribute("data-at", String(e.at));
    mark.append(svg("title", {}, `${e.kind} ${e.node.slice(0, 8)} at ${clock(e.at)}` + (e.latency_s !== undefined && e.latency_s !== null ? ` (${e.latency_s.toFixed(1)} s after demand rose)` : "")));
    root.append(mark);
  }
  const lends = loans.events.filter(e => e.kind === "lend").length, reclaims = loans.events.length - lends;
  fill("loans", root, el("p", {class: "muted", id: "loan-counts"},
    el("span", {class: "swatch s-lent"}), `${lends} lend(s)`, el("span", {class: "swatch s-reclaiming"}), `${reclaims} reclaim(s) in the last ${dur(loans.window_s)}; the axis spans them`));
}
function drawServices(ss, demand) {
  fill("services", el("p", {class: "muted"}, `the services need ${demand === null || demand === undefined ? "–" : demand} server(s); latency ≈ requests in flight ÷ requests/s (Little's law, from the ingress counters)`),
    table(["service", "model", "replicas ready / all", "servers needed", "req/s", "latency", "MoE experts"], ss.map(s =>
      el("tr", {"data-service": s.name}, el("td", {}, s.name, el("br"), el("code", {}, s.url)), el("td", {}, s.model),
        el("td", {}, `${s.ready} / ${s.replicas}`), el("td", {}, s.demand_servers ?? "–"), el("td", {}, rateText(s)),
        el("td", {}, s.latency_ms === null || s.latency_ms === undefined ? (s.rps === null && s.in_flight !== null ? "…" : "–") : num(s.latency_ms, 0) + " ms"),
        el("td", {}, s.moe ? `replicas per layer ${s.moe.replicas_per_layer.join(", ")}; busiest replica planned at ${num(100 * (s.moe.busiest_share || 0), 1)} % of its layer's load` : "–")))));
}
function rateText(s) {
  // A rate needs two readings of the counters a few seconds apart: the next refresh's.
  if (s.rps === null || s.rps === undefined) return s.in_flight === null || s.in_flight === undefined ? "–" : "measuring…";
  return num(s.rps, 1);
}
function drawTeams(teams) {
  const sec = document.getElementById("teams-section");
  if (teams === undefined || teams === null) { sec.hidden = true; return; }
  sec.hidden = false;
  const rows = Array.isArray(teams) ? teams : Object.entries(teams).map(([name, v]) => ({name, ...(typeof v === "object" ? v : {value: v})}));
  const keys = [...new Set(rows.flatMap(r => Object.keys(r)))];
  const cell = v => v === null || v === undefined ? "–" : typeof v !== "object" ? v
    : Array.isArray(v) ? v.join(", ") : Object.entries(v).map(([k, x]) => `${k}: ${x}`).join(", ") || "–";
  fill("teams", table(keys, rows.map(r => el("tr", {"data-team": r.name ?? ""}, ...keys.map(k => el("td", {}, cell(r[k])))))));
}

let nextRound = null, fetchedAt = 0;
function tick() {
  const span = document.getElementById("round-next");
  if (nextRound == null || span === null) return;
  const left = Math.max(0, nextRound - (Date.now() - fetchedAt) / 1000);
  span.textContent = dur(left);
}
async function refresh() {
  let resp;
  try { resp = await fetch("/lyra/api/state", {credentials: "same-origin", cache: "no-store"}); }
  catch (e) { fill("status", "the page cannot reach the cluster; retrying"); return; }
  if (resp.status === 401) { window.location.replace("/lyra/"); return; }
  if (!resp.ok) { fill("status", `the scheduler did not answer (${resp.status}); retrying`); return; }
  const d = await resp.json();
  fill("who", d.user.name + (d.user.admin ? " (admin: every job)" : " (your jobs)"));
  const r = d.rounds;
  nextRound = r.next_in_s; fetchedAt = Date.now();
  if (r.next_in_s == null) fill("round", `policy ${r.policy} · no round in progress`);
  else fill("round", `policy ${r.policy} · round ${r.done ?? "–"} of ${dur(r.round_s)} · next in `, el("span", {id: "round-next"}, dur(r.next_in_s)));
  drawGpus(d.servers); drawQueue(d.queue); drawRunning(d.running); drawEnded(d.ended);
  drawLoans(d.loans, d.servers, d.now); drawServices(d.services, d.demand_servers); drawTeams(d.teams);
  fill("status", `updated ${clock(d.now)}; refreshes every ${REFRESH_MS / 1000} s`);
  document.body.setAttribute("data-rendered", String(d.now));
}
refresh(); setInterval(refresh, REFRESH_MS); setInterval(tick, 1000);
