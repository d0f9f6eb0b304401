// thrifty serve's page: lists from /api/*, plots with the locally served Plotly, live by /api/events.
"use strict";
const $ = (id) => document.getElementById(id);
const selected = {};
const writes = document.body.dataset.writes === "1";
const config = { responsive: true, displaylogo: false };

async function getJson(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function draw(id, traces, layout, count, source) {
  const div = $(id);
  Plotly.react(div, traces, Object.assign({ margin: { t: 30, r: 10, b: 45, l: 60 }, legend: { orientation: "h" } }, layout), config);
  div.dataset.points = String(count);
  div.dataset.source = source;
}

function note(kind, text) { $("note-" + kind).textContent = text || ""; }

const hours = (s) => (s == null ? null : s / 3600);

const views = {
  plans: {
    label: (p) => `${p.id} ${p.workload_key.split("#")[0]} (${p.request.objective})`,
    async show(id) {
      note("plans", "reading the plan's plane...");
      const p = await getJson(`/api/plans/${id}`);
      if (!p.plane) { note("plans", p.reason); return; }
      const q = p.plane, front = p.pareto, best = p.plane_recommendation;
      const pick = (spot) => q.time_s.map((t, i) => [t, q.cost_usd[i], q.label[i], q.spot[i]]).filter((r) => r[3] === spot);
      const cloud = (spot, name, colour) => {
        const rows = pick(spot);
        return { name, type: "scatter", mode: "markers", marker: { size: 4, color: colour, opacity: 0.35 },
                 x: rows.map((r) => hours(r[0])), y: rows.map((r) => r[1]), text: rows.map((r) => r[2]) };
      };
      draw("plot-plan", [
        cloud(false, "on-demand", "#1f77b4"), cloud(true, "spot", "#ff7f0e"),
        { name: "Pareto front", mode: "lines+markers", line: { color: "#000" }, marker: { size: 5 },
          x: front.map((d) => hours(d.predicted_time_s)), y: front.map((d) => d.predicted_cost_usd),
          text: front.map((d) => `${d.instance_type} ${d.nodes}x${d.workers / d.nodes} B=${d.global_batch}`) },
        { name: `recommended (${p.request.objective}): ${best.instance_type}`, mode: "markers",
          marker: { symbol: "star", size: 16, color: "#d62728" }, x: [hours(best.predicted_time_s)], y: [best.predicted_cost_usd],
          error_x: { type: "data", symmetric: false, array: [hours(best.predicted_time_interval_s[1] - best.predicted_time_s)],
                     arrayminus: [hours(best.predicted_time_s - best.predicted_time_interval_s[0])] },
          error_y: { type: "data", symmetric: false, array: [best.predicted_cost_interval_usd[1] - best.predicted_cost_usd],
                     arrayminus: [best.predicted_cost_usd - best.predicted_cost_interval_usd[0]] } },
      ], { xaxis: { title: { text: "predicted time to target (h)" }, type: "log" },
           yaxis: { title: { text: "predicted cost (USD)" }, type: "log" } }, q.shown, id);
      note("plans", `${q.feasible.toLocaleString()} feasible of ${q.candidates.toLocaleString()} candidates (${q.shown} drawn); ` +
        `front ${front.length} points; ` + (p.plane_source === "stored" ? "the plane the plan chose from, as stored" :
        p.matches_stored ? "a plan stored without its plane: computed again, recommendation as stored" :
        "a plan stored without its plane: computed again, and the recommendation differs (its catalog filters were not stored)"));
    },
  },
  searches: {
    label: (s) => `${s.id} ${s.workload_key} seed ${s.seed}: ${s.windows} windows${s.finished ? "" : " (not finished)"}`,
    async show(id) {
      const s = await getJson(`/api/searches/${id}`);
      const w = s.windows, lab = (r) => `${r.instance_type} ${r.num_workers % r.num_nodes ? `${r.num_nodes}n/${r.num_workers}w` : `${r.num_nodes}x${r.num_workers / r.num_nodes}`} B=${r.global_batch}`;
      const moved = new Set(s.moves.map((m) => m.window));
      const at = w.filter((r) => moved.has(r.window));
      draw("plot-search", [
        { name: "path (every window)", mode: "lines+markers", x: w.map((r) => hours(r.elapsed_s)), y: w.map((r) => r.spend_usd),
          text: w.map((r) => `window ${r.window}: ${lab(r)}${r.cut_short ? " (cut short)" : ""}`), marker: { size: 6 } },
        { name: "moves", mode: "markers", marker: { symbol: "x", size: 11, color: "#d62728" },
          x: at.map((r) => hours(r.elapsed_s)), y: at.map((r) => r.spend_usd), text: at.map(lab) },
      ], { xaxis: { title: { text: "elapsed (h)" } }, yaxis: { title: { text: "spend (USD)" } } }, w.length, id);
      note("searches", `${w.length} windows (${s.moves.length} moves between them, $${s.spend_usd.toFixed(2)} in them)` +
        (s.finished ? `; the whole search: ${hours(s.search_time_s).toFixed(2)} h, $${s.search_cost_usd.toFixed(2)}, ${s.search_moves} moves`
          : "; not finished: running, or stopped (thrifty search --resume goes on)"));
    },
  },
  runs: {
    label: (r) => r.source === "folder" ? `${r.id} ${r.name} (folder${r.job ? ", running" : ""})` : `${r.id} ${r.workload} ${r.workers} workers ${r.policy}`,
    async show(id) {
      const r = await getJson(`/api/runs/${id}`);
      const ranks = Object.entries(r.series.ranks);
      draw("plot-split", ranks.map(([rank, s]) => ({ name: `rank ${rank}`, mode: "lines", line: { shape: "hv" }, x: s.step, y: s.local_batch })),
        { xaxis: { title: { text: "step" } }, yaxis: { title: { text: "local batch b_k" } } }, r.series.steps.length, id);
      draw("plot-steptime", [
        ...ranks.map(([rank, s]) => ({ name: `rank ${rank} compute`, mode: "lines", x: s.step, y: s.compute_time_s })),
        { name: "step", mode: "lines", line: { color: "#000", dash: "dot" }, x: r.series.steps, y: r.series.step_time_s },
      ], { xaxis: { title: { text: "step" } }, yaxis: { title: { text: "seconds" } } }, r.series.steps.length, id);
      const job = r.job;
      note("runs", `${r.series.steps.length} steps, ${ranks.length} ranks` + (job && job.running ? `; running as job ${job.id}` : ""));
      let stop = $("stop-run");  // kept while the run's job runs, so focus and a click stay on it
      if (writes && job && job.running) {
        if (!stop) {
          stop = document.createElement("button");
          stop.id = "stop-run"; stop.textContent = "Checkpoint and stop this run";
          $("note-runs").after(stop);
        }
        stop.onclick = () => stopJob(job.id);
      } else if (stop) {
        stop.remove();
      }
    },
  },
  campaigns: {
    label: (c) => `${c.id} (${c.sampler}, ${c.simulation}): ${c.runs} runs`,
    async show(id) {
      const c = await getJson(`/api/campaigns/${id}`);
      const p = c.progress, t = p.map((r) => hours(r.elapsed_s));
      draw("plot-campaign-progress", [
        { name: "completed", mode: "lines+markers", line: { shape: "hv" }, x: t, y: p.map((r) => r.completed) },
        { name: "converged", mode: "lines+markers", line: { shape: "hv" }, x: t, y: p.map((r) => r.converged) },
      ], { xaxis: { title: { text: "elapsed (h)" } }, yaxis: { title: { text: "runs" } } }, p.length, id);
      draw("plot-campaign-bill", [
        { name: "runs restarted", mode: "lines+markers", line: { shape: "hv" }, x: p.map((r) => r.completed), y: p.map((r) => r.preemptions) },
        { name: "work redone (s)", mode: "lines+markers", yaxis: "y2", x: p.map((r) => r.completed), y: p.map((r) => r.lost_work_s) },
      ], { xaxis: { title: { text: "runs completed" } }, yaxis: { title: { text: "runs restarted" } },
           yaxis2: { title: { text: "work redone (s)" }, overlaying: "y", side: "right" } }, p.length, id);
      const a = c.surrogate_accuracy;
      if (a && a.runs) {
        draw("plot-campaign-accuracy", [{ name: "bins within the MD error bar", type: "bar", x: a.run_names, y: a.per_run_within_error }],
          { yaxis: { title: { text: "share of bins within error" }, range: [0, 1] } }, a.runs, id);
      }
      const b = c.bill, open = b.open_sessions ? ` (${b.open_sessions} session(s) without an end not counted)` : "";
      const bill = b.cost_usd == null ? `bill: ${b.reason}` :
        `bill $${b.cost_usd.toFixed(2)} for ${b.node_hours_model.toFixed(2)} node-hours ($${b.cost_at_on_demand_usd.toFixed(2)} on demand)${open}`;
      const acc = a == null ? "no --surrogate given" : a.runs ? `surrogate: ${(100 * a.within_error).toFixed(1)}% of bins within the MD error bar over ${a.runs} runs` : `surrogate: ${a.reason}`;
      note("campaigns", `${c.runs} runs, ${c.converged} converged, ${c.preemptions} runs restarted after a preemption, ${c.lost_work_s.toFixed(1)} s redone; ${bill}; ${acc}`);
    },
  },
};

async function refreshList(kind) {
  const items = await getJson(`/api/${kind}`);
  const pick = $("pick-" + kind);
  const keep = selected[kind];
  pick.replaceChildren(...items.map((item) => new Option(views[kind].label(item), item.id)));
  if (!items.length) { note(kind, `nothing stored yet`); return; }
  selected[kind] = items.some((i) => i.id === keep) ? keep : items[0].id;
  pick.value = selected[kind];
  if (selected[kind] !== keep) await show(kind);
}

async function show(kind) {
  try { await views[kind].show(selected[kind]); } catch (error) { note(kind, String(error.message || error)); }
}

async function refreshJobs() {
  const jobs = await getJson("/api/jobs");
  $("jobs").tBodies[0].replaceChildren(...jobs.map((j) => {
    const tr = document.createElement("tr");
    for (const text of [j.name, j.running ? "running" : "stopped", j.attempts, j.checkpoints, j.preemptions]) {
      tr.insertCell().textContent = String(text);
    }
    const cell = tr.insertCell();
    if (writes && j.running) {
      const b = document.createElement("button");
      b.textContent = "Checkpoint and stop"; b.onclick = () => stopJob(j.id); cell.append(b);
    }
    return tr;
  }));
}

async function post(url, body) {
  const token = $("token") ? $("token").value : "";
  const response = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
                                       body: JSON.stringify(body || {}) });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

async function stopJob(id) {
  try { const done = await post(`/api/jobs/${id}/stop`); note("jobs", `notice sent to the runner (pid ${done.signalled})`); }
  catch (error) { note("jobs", String(error.message)); }
  await refreshJobs();
}

async function surrogate(event) {
  event.preventDefault();
  const query = new URLSearchParams(new FormData($("surrogate-form"))).toString();
  try {
    const s = await getJson(`/api/surrogate/profile?${query}`);
    const band = (ion, colour) => {
      const m = s[ion].mean_molar, low = s[ion].low_molar, high = s[ion].high_molar;
      return [{ name: `${ion} 90% band`, x: [...s.z_nm, ...s.z_nm.slice().reverse()],
                y: [...high, ...low.slice().reverse()],
                fill: "toself", line: { width: 0 }, fillcolor: colour + "40", hoverinfo: "skip" },
              { name: `${ion} mean`, mode: "lines", line: { color: colour }, x: s.z_nm, y: m }];
    };
    draw("plot-surrogate", [...band("cation", "#d62728"), ...band("anion", "#1f77b4")],
      { xaxis: { title: { text: "z from the mid-plane (nm)" } }, yaxis: { title: { text: "density (molar)" } } }, s.z_nm.length, query);
    note("surrogate", "");
  } catch (error) { note("surrogate", String(error.message)); }
}

async function newPlan(event) {
  event.preventDefault();
  const form = new FormData($("plan-form"));
  try {
    const done = await post("/api/plans", { profile: form.get("profile"), objective: form.get("objective") });
    note("new-plan", `stored plan ${done.id}: ${done.recommended.instance_type}`);
    await refreshList("plans");
  } catch (error) { note("new-plan", String(error.message)); }
}

async function refreshProfiles() {
  const pick = $("pick-profile");
  if (!pick) return;
  const items = await getJson("/api/profiles");
  pick.replaceChildren(...items.map((p) => new Option(`${p.id} ${p.workload}`, p.id)));
}

function live() {
  const source = new EventSource("/api/events");
  source.addEventListener("hello", () => { $("live").textContent = "live"; });
  source.addEventListener("change", async (message) => {
    const change = JSON.parse(message.data);
    $("live").textContent = `live, updated ${new Date().toLocaleTimeString()}`;
    if (change.kind === "jobs") return refreshJobs();
    if (change.kind === "profiles") return refreshProfiles();
    if (!views[change.kind]) return;
    await refreshList(change.kind);
    if (change.ids.includes(selected[change.kind])) await show(change.kind);
  });
  source.onerror = () => { $("live").textContent = "reconnecting..."; };
}

document.addEventListener("DOMContentLoaded", async () => {
  for (const kind of Object.keys(views)) {
    $("pick-" + kind).addEventListener("change", (e) => { selected[kind] = e.target.value; show(kind); });
  }
  $("surrogate-form").addEventListener("submit", surrogate);
  if ($("plan-form")) $("plan-form").addEventListener("submit", newPlan);
  await Promise.all([...Object.keys(views).map((k) => refreshList(k).catch((e) => note(k, String(e.message)))),
                     refreshJobs(), refreshProfiles()]);
  live();
});
