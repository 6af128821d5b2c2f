// The run pages: the static report (data embedded) and the viewer (data from /api/*).
(function () {
  "use strict";
  const MODE = document.body.dataset.mode;  // "static" or "live"
  let DATA = null;        // {runs: [...], baseline, comparisons: [...], waiting (live)}
  let current = 0;        // index of the shown run
  let currentPath = null; // ... and its path: new runs can appear before it (live)
  let baseline = "";      // live: the chosen baseline's path, "none", or "" (the server's default)
  let force = null;       // live: compare runs of another dataset or selection too
  let sortKey = null, sortDir = 1;
  let openId = null;
  let version = null;

  const $ = (s) => document.querySelector(s);
  const esc = (v) => String(v === null || v === undefined ? "" : v)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  const pct = (x) => (x === null || x === undefined) ? "not judged" : (100 * x).toFixed(1) + "%";
  const judged = (x) => x !== null && x !== undefined;  // a rate over nothing judged is null: no bar, no 0%
  // a rate's bar text: "p% (correct/n, ...)", or with nothing judged "not judged (...)"
  const rateText = (acc, counts, extra) => judged(acc) ? `${pct(acc)} (${counts}${extra || ""})` : `not judged${extra ? ` (${extra.replace(/^[,;] /, "")})` : ""}`;
  const num = (x, d) => (x === null || x === undefined || isNaN(x)) ? "" : Number(x).toFixed(d === undefined ? 0 : d);
  const tokens = (r) => ((r.usage || {}).prompt_tokens || 0) + ((r.usage || {}).completion_tokens || 0);
  // a row's cost: its agent's calls and its LLM judge's (every scoring of it)
  const cost = (r) => ((r.usage || {}).cost || 0) + ((r.judge_usage || {}).cost || 0);
  // report.json's `priced` false (run.json's prices "unset"): the agents' calls have no price, so no cost
  const NOT_PRICED = "not priced (no price_*_per_1k)";
  const notPriced = (run) => (run.summary || {}).priced === false || (run.run || {}).prices === "unset";
  const verdict = (r) => r.status === "running" ? "running" : r.correct === true && r.status !== "error" ? "correct" : (r.correct === false || r.status === "error") ? "wrong" : "unscored";
  const iidOf = (r) => r.instance || r.instance_id;  // with epochs a row is "ID #eN"

  // ---------- charts (plain SVG) ----------
  // items: [{label, value, lo, hi}], values in [0, max]; a rate's interval (max 1) is written after its text
  function barChart(items, opts) {
    opts = opts || {};
    const w = opts.width || 320, bh = 18, gap = 6, left = 90, right = opts.right || (opts.max === 1 ? 110 : 50);
    const max = opts.max || Math.max(1, ...items.map((i) => i.hi !== undefined ? i.hi : i.value));
    const h = items.length * (bh + gap) + 4;
    const x = (v) => left + (w - left - right) * (v / max);
    let s = `<svg width="${w}" height="${h}" role="img">`;
    items.forEach((it, k) => {
      const y = k * (bh + gap) + 2;
      s += `<text x="${left - 4}" y="${y + 13}" text-anchor="end">${esc(it.label)}</text>`;
      if (!judged(it.value)) {  // nothing judged: its words, no bar and no interval
        s += `<text x="${left + 4}" y="${y + 13}" class="not-judged">${esc(it.text !== undefined ? it.text : "not judged")}</text>`;
        return;
      }
      s += `<rect x="${left}" y="${y}" width="${Math.max(0, x(it.value) - left)}" height="${bh}" fill="${it.color || "#5b7fd6"}"></rect>`;
      if (it.lo !== undefined) {
        s += `<line x1="${x(it.lo)}" x2="${x(it.hi)}" y1="${y + bh / 2}" y2="${y + bh / 2}" stroke="#111" stroke-width="1.5"></line>`;
        s += `<line x1="${x(it.lo)}" x2="${x(it.lo)}" y1="${y + 4}" y2="${y + bh - 4}" stroke="#111"></line>`;
        s += `<line x1="${x(it.hi)}" x2="${x(it.hi)}" y1="${y + 4}" y2="${y + bh - 4}" stroke="#111"></line>`;
      }
      const ci = it.lo !== undefined && opts.max === 1 ? ` [${pct(it.lo)}, ${pct(it.hi)}]` : "";
      s += `<text x="${Math.min(w - right + 4, x(it.hi !== undefined ? it.hi : it.value) + 4)}" y="${y + 13}">${esc((it.text !== undefined ? it.text : it.value) + ci)}</text>`;
    });
    return s + "</svg>";
  }

  function histogram(values, label, digits) {
    values = values.filter((v) => typeof v === "number" && isFinite(v));
    if (!values.length) return `<p class="muted">no data</p>`;
    const w = 320, h = 120, bins = Math.min(20, Math.max(1, Math.ceil(Math.sqrt(values.length))));
    const lo = Math.min(...values), hi = Math.max(...values), span = (hi - lo) || 1;
    const counts = new Array(bins).fill(0);
    values.forEach((v) => counts[Math.min(bins - 1, Math.floor((v - lo) / span * bins))]++);
    const cmax = Math.max(...counts), bw = (w - 20) / bins;
    let s = `<svg width="${w}" height="${h + 30}" role="img"><title>${esc(label)}</title>`;
    counts.forEach((c, k) => {
      const bhh = (h - 10) * c / cmax;
      s += `<rect x="${10 + k * bw}" y="${h - bhh}" width="${Math.max(1, bw - 1)}" height="${bhh}" fill="#2c8a8a"><title>${c}</title></rect>`;
    });
    const sorted = values.slice().sort((a, b) => a - b);
    const med = sorted[Math.floor((sorted.length - 1) / 2)];
    s += `<text x="10" y="${h + 14}">${num(lo, digits)}</text><text x="${w - 10}" y="${h + 14}" text-anchor="end">${num(hi, digits)}</text>`;
    s += `<text x="${w / 2}" y="${h + 28}" text-anchor="middle">median ${num(med, digits)} · n ${values.length}</text>`;
    return s + "</svg>";
  }

  // ---------- Gaia2 (benchmarks/gaia2/report.py's figures; a row's verdicts.gaia2: ARE's verdict) ----------
  const G2_COLS = ["", "scenarios", "runs passed/judged", "accuracy", "pass@K", "pass^K", "scenarios judged", "errored", "not run", "not judged", "cost/scenario", "time/run"];
  function gaia2Card(g) {
    const head = g.headline, k = g.k;
    const line = (label, x) => `<tr><td>${esc(label)}</td><td>${x.scenarios}</td><td>${x.passed_runs}/${x.judged_runs}</td><td>${pct(x.accuracy)}</td>` +
      `<td>${pct(x.pass_at_k)}</td><td>${pct(x.pass_hat_k)}</td><td>${x.judged_scenarios}</td><td>${x.errored_runs}</td><td>${x.missing_runs}</td>` +
      `<td class="${x.not_judged_runs ? "no" : ""}">${x.not_judged_runs}</td><td>${judged(x.cost_per_scenario) ? "$" + num(x.cost_per_scenario, 4) : "not priced"}</td>` +
      `<td>${judged(x.time_per_run_s) ? num(x.time_per_run_s, 1) + "s" : "-"}</td></tr>`;
    const spread = judged(head.std_over_epochs) ? `, std over the ${k} epochs ${pct(head.std_over_epochs)}` : "";
    const left = head.not_judged.length ? `; no judged run, left out: ${head.not_judged.map(esc).join(", ")}` : "";
    return `<div class="card" id="gaia2"><h3>Gaia2: ${pct(head.accuracy)}, the equal-weight mean of ${head.capabilities.length} capabilities' accuracies (each capability weighted equally${spread})${left}</h3>` +
      (g.judge && g.judge.warning ? `<p class="no" id="gaia2-judge-warning"><b>Not comparable to ARE's leaderboard</b>: ${esc(g.judge.warning)}</p>` : "") +
      `<p class="muted">accuracy: runs passed / runs judged (an errored or unrun run fails; a run ARE could not judge is left out and counted); pass@${k}, pass^${k}: scenarios with at least one, with every one of their ${k} epochs passed, over the scenarios judged in every epoch</p>` +
      `<table id="gaia2-figures"><thead><tr>${G2_COLS.map((c) => `<th>${esc(c.replace("K", k))}</th>`).join("")}</tr></thead><tbody>` +
      Object.entries(g.capabilities).map(([c, x]) => line("capability " + c, x)).join("") +
      Object.entries(g.variants).map(([v, x]) => line("variant " + v, x)).join("") + "</tbody></table></div>";
  }
  const JUDGES = {hard: "hard: ARE's scripted checks only, no LLM; message texts are not compared",
                  llm: "llm: ARE's scripted checks and its LLM soft checks (message texts compared)"};
  function gaia2Verdict(v) {
    const cls = v.verdict === "pass" ? "yes" : "no", u = v.judge_usage || {};
    let h = `<div class="gaia2-verdict"><b>ARE's verdict</b>: <span class="${cls}">${esc(v.verdict)}</span> · judge ${esc(JUDGES[v.judge] || v.judge)}` +
      ` · turns ${esc(Math.min(v.turns_done, v.turns))}/${esc(v.turns)}` +
      `${v.turns_done > v.turns ? ` · ${esc(v.turns_done)} messages to the user` : ""}${u.llm_calls ? ` · judge ${esc(u.llm_calls)} calls, $${num(u.cost, 4)}` : ""}`;
    if (v.error) h += `<div class="no"><b>error</b> ${esc(v.error)}</div>`;
    if (v.rationale) h += `<div><b>rationale</b>${pre(v.rationale)}</div>`;
    const acts = v.oracle_actions || [];
    if (acts.length) h += `<table class="oracle-actions"><thead><tr><th>turn</th><th>oracle action</th><th>tool</th><th>matched</th><th>agent event</th></tr></thead><tbody>` +
      acts.map((a) => `<tr class="${a.matched ? "matched" : "unmatched"}"><td>${esc(a.turn)}</td><td>${esc(a.oracle_event_id)}</td><td>${esc(a.tool)}</td>` +
        `<td class="${a.matched ? "yes" : "no"}">${a.matched ? "matched" : a.judged === false ? "not judged (turn not reached)" : "not matched"}</td><td>${esc(a.agent_event_id || "")}</td></tr>`).join("") +
      "</tbody></table>";
    return h + "</div>";
  }

  // ---------- overview ----------
  // accuracy so far (html.py progress): over finished instances with a verdict, never the unfinished
  function progressText(g) {
    const done = g.n_finished === g.n_selected && !g.n_running;
    let t = `${g.n_correct}/${g.n_judged} correct${done ? "" : " so far"}, ${g.n_finished} of ${g.n_selected} finished`;
    if (g.n_running) t += `, ${g.n_running} running`;
    if (g.n_no_verdict) t += `, ${g.n_no_verdict} without a verdict (not counted)`;
    if (g.n_unscored) t += `, ${g.n_unscored} unscored: no target (not counted)`;
    return t;
  }
  function renderOverview(run) {
    const s = run.summary || {};
    const rateWord = (s.words || {}).rate || "accuracy";  // the benchmark's word for its rate (report.json words)
    const g = run.progress || {};
    const unfinished = g.n_selected !== undefined && g.n_finished < g.n_selected;
    const soFar = (label, b, color) => ({label, value: b.accuracy, lo: b.ci95 ? b.ci95[0] : undefined, hi: b.ci95 ? b.ci95[1] : undefined,
      text: rateText(b.accuracy, `${b.n_correct}/${b.n_judged}`, `; ${b.n_finished} of ${b.n_selected} finished`), color});
    const state = run.live === true ? "running" : run.live === false ? (unfinished ? "not running (stopped before the end)" : "finished") : "state unknown";
    const runningRows = run.rows.filter((r) => r.status === "running");
    const runningCard = runningRows.length ? `<div class="card" id="running"><h3>Running now (${runningRows.length})</h3>` +
      runningRows.map((r) => `<div><a href="#" class="running-id" data-id="${esc(r.instance_id)}">${esc(r.instance_id)}</a> <span class="muted">attempt ${esc(r.attempt)}</span></div>`).join("") + "</div>" : "";
    const levels = Object.entries(s.per_level || {});
    // every rate is over the judged: an instance whose scorer reached no verdict is left out and said
    const unjudged = (k, u) => (k ? `, ${k} not judged` : "") + (u ? `, ${u} unscored` : "");
    // unscored (no target, or a placeholder such as GAIA test's "?"): left out like the unjudged; a
    // group of unscored instances alone has no accuracy at all (no bar)
    const scoredLevels = levels.filter(([, b]) => b.n - (b.no_verdict || 0) - (b.unscored || 0) > 0 || !b.unscored);
    const onlyUnscored = s.n_unscored && !s.n_judged;
    const acc = (onlyUnscored ? [] : [{label: "overall", value: s.accuracy, lo: (s.ci95 || [0, 0])[0], hi: (s.ci95 || [0, 0])[1],
                  text: rateText(s.accuracy, `${s.n_correct}/${s.n_judged === undefined ? s.n_selected : s.n_judged}`, unjudged(s.n_no_verdict, s.n_unscored))}])
      .concat(scoredLevels.map(([k, b]) => ({label: "level " + k, value: b.accuracy, lo: b.ci95[0], hi: b.ci95[1],
                                       text: rateText(b.accuracy, `${b.correct}/${b.n - (b.no_verdict || 0) - (b.unscored || 0)}`, unjudged(b.no_verdict, b.unscored)), color: "#8aa3e0"})));
    const unscoredNote = s.n_unscored ? `<p class="muted" id="unscored">${s.n_unscored} of ${s.n_selected} unscored (no target: ` +
      `the answers are absent or a placeholder), left out of every rate${onlyUnscored ? "; nothing was scored, so there is no accuracy" : ""}</p>` : "";
    const headline = Object.keys(s.scorers || {})[0];
    const accBars = unfinished  // while instances are unfinished: so far, never counting them as failed
      ? (g.n_unscored && !g.n_judged ? [] : [soFar("so far", g, "#5b7fd6")].concat(Object.entries(g.per_level || {}).map(([k, b]) => soFar("level " + k, b, "#8aa3e0")))) : acc;
    const colors = {ok: "#3c9a3c", limit: "#d9a21b", error: "#c8354b", missing: "#999", running: "#5b7fd6"};
    const outcomes = Object.entries(s.outcomes || {}).map(([k, v]) => ({label: k, value: v, color: colors[k]}));
    const errs = Object.entries(s.errors_by_kind || {}).map(([k, v]) => ({label: k, value: v, color: "#c8354b"}));
    // scorer errors: verdicts a scorer could not reach (report.json's scorers[*].no_verdict, first_error)
    const noVerdict = Object.entries(s.scorers || {}).filter(([, v]) => v && v.no_verdict);
    noVerdict.forEach(([k, v]) => errs.push({label: "scorer " + k, value: v.no_verdict, color: "#c8354b"}));
    const rows = run.rows;
    const cfg = run.run || {};
    const brief = ["dataset", "model", "agent", "image"].filter((k) => cfg[k] !== undefined)
      .map((k) => `<b>${k}</b> ${esc(cfg[k])}`).join(" · ");
    const limits = cfg.limits ? Object.entries(cfg.limits).filter(([, v]) => v !== null && v !== undefined)  // unset: not shown
      .map(([k, v]) => `${esc(k)}=${esc(v)}`).join(", ") : "";
    let extra = "";
    const known = new Set(["n_selected", "n_rows", "n_correct", "n_judged", "n_no_verdict", "n_unscored", "accuracy", "ci95", "per_level", "outcomes", "errors_by_kind", "first_errors", "stderr",
                           "ids", "env_outcomes_per_instance", "scorers", "env_outcomes", "epochs", "breakdowns", "disagreements", "costs", "figures"]);
    // dollars (report.json's `costs`): the agents', the judge's, the total and per level
    const c = s.costs;
    const unpriced = notPriced(run);  // the agents' model gives no prices: no dollar figure for it, never $0
    const costBars = c && !unpriced ? Object.entries(c.per_level || {}).map(([k, v]) => ({label: "level " + k, value: v, text: "$" + num(v, 4), color: "#d9a21b"})) : [];
    const costCard = c && unpriced ? `<div class="card" id="costs"><h3>Cost: ${NOT_PRICED}` +
      `${c.judge_calls ? ` (judge $${num(c.judge, 4)} in ${esc(c.judge_calls)} calls)` : ""}</h3></div>` :
      c ? `<div class="card" id="costs"><h3>Cost: $${num(c.total, 4)} (agents $${num(c.agents, 4)}, judge $${num(c.judge, 4)} in ${esc(c.judge_calls)} calls)</h3>` +
      `${costBars.length ? barChart(costBars, {max: Math.max(...costBars.map((b) => b.value), 1e-9)}) : ""}</div>` : "";
    // accuracy per breakdown label (report.json's `breakdowns`: GAIA's tool family and steps bucket, question type...)
    const names = {tool_family: "Accuracy per tool family", steps: "Accuracy per annotated step count"};
    const breakdownCards = Object.entries(s.breakdowns || {}).filter(([field]) => !((s.figures || {}).gaia2 && ["capability", "variant"].includes(field))).map(([field, groups]) => {
      const bars = Object.entries(groups).map(([k, g]) => ({label: k, value: g.accuracy, lo: g.ci95 ? g.ci95[0] : undefined,
        hi: g.ci95 ? g.ci95[1] : undefined, text: rateText(g.accuracy, `${g.correct}/${g.n - (g.no_verdict || 0)}`, unjudged(g.no_verdict)), color: "#2c8a8a"}));
      return `<div class="card breakdown" data-field="${esc(field)}"><h3>${esc(names[field] || "Accuracy per " + field)}, 95% CI</h3>${barChart(bars, {max: 1, width: 560, right: 290})}</div>`;
    }).join("");
    // strict (gaia) vs lenient (llm_judge): where they disagree (report.json's `disagreements`)
    const dis = s.disagreements;
    const disItems = (items) => items.map((d) => `<li><a href="#" class="running-id" data-id="${esc(d.instance_id)}">${esc(d.instance_id)}</a>: answer <code>${esc(d.answer)}</code>, target <code>${esc(d.target)}</code></li>`).join("");
    const disCard = dis ? `<div class="card" id="disagreements"><h3>gaia vs llm_judge: ${dis.lenient_only.length + dis.strict_only.length} of ${dis.compared} disagree</h3>` +
      `<p>Right but badly formatted (judge only): ${dis.lenient_only.length}</p><ul>${disItems(dis.lenient_only)}</ul>` +
      `<p>The reverse (gaia only): ${dis.strict_only.length}</p><ul>${disItems(dis.strict_only)}</ul></div>` : "";
    // --epochs K: each epoch alone and each reducer (report.json's `epochs`)
    const ep = s.epochs;
    const epochBars = ep ? Object.entries(ep.per_epoch || {}).map(([k, b]) => ({label: "epoch " + k, value: b.accuracy,
      lo: b.ci95[0], hi: b.ci95[1], text: rateText(b.accuracy, `${b.correct}/${b.n - (b.no_verdict || 0) - (b.unscored || 0)}`, unjudged(b.no_verdict, b.unscored)), color: "#8aa3e0"}))
      .concat(Object.entries(ep.reducers || {}).map(([k, r]) => ({label: k, value: r.value, lo: r.ci95[0], hi: r.ci95[1],
        text: judged(r.value) ? `${pct(r.value)}${r.ties && r.ties.length ? ` (${r.ties.length} tie${r.ties.length > 1 ? "s" : ""})` : ""}` : "not judged", color: "#3c9a3c"}))) : [];
    // per-scorer pass rates (report.json's `scorers`, when this harness writes them)
    const scorers = Object.entries(s.scorers || {}).filter(([, v]) => v && v.ci95).map(([k, v]) =>
      ({label: k, value: v.accuracy, lo: v.ci95[0], hi: v.ci95[1], text: rateText(v.accuracy, `${v.correct}/${v.n - (v.no_verdict || 0)}`, unjudged(v.no_verdict)) + (judged(v.mean_score) ? `, mean score ${v.mean_score.toFixed(2)}` : ""), color: "#7a57c9"}));
    // environment action outcomes, summed over the rows that count them (rows' `env_outcomes`)
    const envs = {};
    rows.forEach((r) => Object.entries(r.env_outcomes || {}).forEach(([env, outs]) =>
      Object.entries(outs || {}).forEach(([o, c]) => { envs[env] = envs[env] || {}; envs[env][o] = (envs[env][o] || 0) + c; })));
    const envNames = Object.keys(envs).sort(), outNames = Array.from(new Set([].concat(...Object.values(envs).map(Object.keys)))).sort();
    const envTable = envNames.length ? `<table id="env-outcomes"><tr><th>env</th>${outNames.map((o) => `<th>${esc(o)}</th>`).join("")}</tr>` +
      envNames.map((e) => `<tr><td>${esc(e)}</td>${outNames.map((o) => `<td class="${o === "ok" ? "" : envs[e][o] ? "no" : ""}">${envs[e][o] || 0}</td>`).join("")}</tr>`).join("") + "</table>" : "";
    const other = Object.entries(s).filter(([k]) => !known.has(k));
    if (other.length) extra = `<details class="config"><summary>report.json: every other key</summary><pre>${esc(JSON.stringify(Object.fromEntries(other), null, 2))}</pre></details>`;
    $("#overview").innerHTML = `
      <h2>Run ${esc(run.name)} <span class="run-state">${esc(state)}</span></h2>
      <p>${brief}${limits ? " · <b>limits</b> " + limits : ""}</p>
      <p id="progress" class="${unfinished ? "unfinished" : ""}">${esc(progressText(g))}${unfinished ? ` <span class="muted">(counting the ${g.n_selected - g.n_finished} unfinished as failed, as report.json does: ${pct(s.accuracy)})</span>` : ""}</p>
      <details class="config"><summary>Run configuration (run.json)</summary><pre>${esc(JSON.stringify(cfg, null, 2))}</pre></details>
      ${extra}
      <div class="cards">
        ${runningCard}
        <div class="card" id="chart-accuracy"><h3>${unfinished ? "So far: " : ""}${esc(unfinished ? rateWord : rateWord.charAt(0).toUpperCase() + rateWord.slice(1))}${headline ? ` (${esc(headline)})` : ""}, 95% CI (Wilson), over the ${unfinished ? "finished and " : ""}judged</h3>${unscoredNote}${accBars.length ? barChart(accBars, unfinished ? {max: 1, width: 720, right: 350} : {max: 1, width: 560, right: 290}) : ""}</div>
        ${ep ? `<div class="card" id="chart-epochs"><h3>${ep.k} epochs: each alone and reduced (headline: ${esc(ep.primary)}); answers agree ${pct(ep.agreement)} of pairs, all ${pct(ep.all_agree)} of instances</h3>${barChart(epochBars, {max: 1, width: 560, right: 290})}</div>` : ""}
        <div class="card" id="chart-outcomes"><h3>Outcomes</h3>${barChart(outcomes)}</div>
        <div class="card" id="chart-errors"><h3>Error kinds</h3>${errs.length ? barChart(errs) : '<p class="muted">no errors</p>'}${Object.entries(s.first_errors || {}).map(([k, v]) =>
          `<p class="no first-error"><b>first ${esc(k)} error</b>: ${esc(v)}</p>`).join("")}</div>
        ${noVerdict.length ? `<div class="card" id="no-verdict"><h3>No verdict</h3>${noVerdict.map(([k, v]) =>
          `<p class="no"><b>${esc(k)}</b>: no verdict: ${esc(v.no_verdict)} of ${esc(v.n)}; first: ${esc(v.first_error || "-")}</p>`).join("")}</div>` : ""}
        ${scorers.length ? `<div class="card" id="chart-scorers"><h3>Pass rate per scorer, 95% CI (report.json)</h3>${barChart(scorers, {max: 1, width: 640, right: 370})}</div>` : ""}
        ${(s.figures || {}).gaia2 ? gaia2Card(s.figures.gaia2) : ""}
        ${breakdownCards}
        ${disCard}
        ${envTable ? `<div class="card"><h3>Environment actions</h3>${envTable}</div>` : ""}
        <div class="card"><h3>Tokens per instance</h3>${histogram(rows.map(tokens), "tokens", 0)}</div>
        ${costCard}
        ${unpriced ? "" : `<div class="card"><h3>Cost per instance</h3>${histogram(rows.map(cost), "cost", 4)}</div>`}
        <div class="card"><h3>Seconds per instance</h3>${histogram(rows.map((r) => r.duration_s), "seconds", 1)}</div>
      </div>`;
  }

  // ---------- comparison ----------
  function compareFor() {
    return (DATA.comparisons || []).find((c) => c.other_index === current) || null;
  }
  function deltaText(c) {
    if (c.reasons.length && !c.forced) return `<span class="not-compared">not compared: ${esc(c.reasons.join("; "))}</span>`;
    if (!c.n_common) return `<span class="not-compared">no common instances</span>`;
    if (!c.compared) return `<span class="not-compared">none of the ${c.n_common} common instances finished with a verdict in both</span>`;
    return `${(c.delta >= 0 ? "+" : "") + pct(c.delta)} [${pct(c.delta_ci95[0])}, ${pct(c.delta_ci95[1])}]` +
      (c.forced ? ` <span class="no dataset-warning">(compared anyway: ${esc(c.reasons.join("; "))})</span>` : "");
  }
  function renderComparison() {
    const cs = DATA.comparisons || [];
    let h = "";
    if (MODE === "live" && DATA.runs.length > 1) {  // comparing is a choice: a baseline, or none
      const chosen = DATA.baseline === null || DATA.baseline === undefined ? "none" : DATA.runs[DATA.baseline].path;
      h += `<div id="cmp-controls"><label>Compare with baseline <select id="baseline"><option value="none">no comparison</option>` +
        DATA.runs.map((r) => `<option value="${esc(r.path)}"${r.path === chosen ? " selected" : ""}>${esc(r.name)}</option>`).join("") +
        `</select></label> <label><input type="checkbox" id="cmp-force"${DATA.force ? " checked" : ""}> also runs of another dataset or selection</label></div>`;
    }
    if (!cs.length) { $("#comparison").innerHTML = h; return; }
    h += `<h2>Comparison with ${esc(DATA.runs[DATA.baseline].name)}</h2><p class="muted">paired by instance id, over the instances both runs selected and finished with a verdict; 95% CI of the paired difference</p>` +
      `<table id="cmp-table"><thead><tr><th>run</th><th>paired</th><th>accuracy</th><th>delta (95% CI)</th><th>fixed</th><th>broken</th><th>unchanged</th></tr></thead><tbody>`;
    cs.forEach((c, k) => {
      const shown = c.compared;
      h += `<tr data-cmp="${k}"><td>${esc(c.other)}</td><td>${c.n}${c.n_left_out ? ` <span class="muted">(${c.n_left_out} left out: unfinished or no verdict)</span>` : ""}</td>
        <td>${shown ? pct(c.base_accuracy) + " → " + pct(c.other_accuracy) : ""}</td>
        <td class="delta">${deltaText(c)}</td>
        <td class="fixed-count">${shown ? c.fixed.length : ""}</td><td class="broken-count">${shown ? c.broken.length : ""}</td>
        <td>${shown ? c.unchanged_pass.length + c.unchanged_fail.length : ""}</td></tr>`;
    });
    h += `</tbody></table>`;
    cs.forEach((c) => {
      if (c.conclusion) h += `<p class="cmp-conclusion">${esc(c.other)}: ${esc(c.conclusion)}</p>`;
      if (c.not_comparable && c.not_comparable.length) h += `<p class="muted cmp-not-comparable">${esc(c.other)}: ${c.not_comparable.length} not comparable (in one selection only, unfinished or without a verdict in a run)</p>`;
      (c.calls || []).forEach((d) => { h += `<p class="no cmp-calls">${esc(c.other)}: ${esc(d)}</p>`; });
    });
    cs.filter((c) => c.compared).forEach((c) => {
      h += `<details class="cmp-detail"><summary>${esc(c.other)}: ids fixed and broken</summary>
        <p><b>fixed</b> <span class="cmp-list fixed-ids">${c.fixed.map(esc).join(" ")}</span></p>
        <p><b>broken</b> <span class="cmp-list broken-ids">${c.broken.map(esc).join(" ")}</span></p></details>`;
    });
    $("#comparison").innerHTML = h;
  }
  function changeOf(row) {
    const c = compareFor();
    if (!c || !c.compared) return "";
    const iid = iidOf(row);
    if (c.fixed.includes(iid)) return "fixed";
    if (c.broken.includes(iid)) return "broken";
    if (c.unchanged_pass.includes(iid) || c.unchanged_fail.includes(iid)) return "unchanged";
    return "";
  }

  // ---------- runs (live: every run the viewer watches) ----------
  function renderRuns() {
    let h = "";
    if ((DATA.waiting || []).length) h += `<p id="waiting">waiting for ${DATA.waiting.map(esc).join(", ")} to appear</p>`;
    if (DATA.runs.length > 1) {
      h += `<table id="runs-table"><thead><tr><th>run</th><th>dataset</th><th>model</th><th>state</th><th>progress</th></tr></thead><tbody>` +
        DATA.runs.map((r, k) => {
          const state = r.live === true ? "running" : r.live === false ? "" : "unknown";
          return `<tr data-run="${k}" class="${k === current ? "selected" : ""}"><td>${esc(r.name)}</td><td>${esc((r.run || {}).dataset)}</td>` +
            `<td>${esc((r.run || {}).model)}</td><td>${state}</td><td>${esc(progressText(r.progress || {}))}</td></tr>`;
        }).join("") + "</tbody></table>";
    }
    $("#runs").innerHTML = h;
  }

  // ---------- table ----------
  const COLS = [
    ["instance_id", "instance", (r) => r.instance_id],
    ["epoch", "epoch", (r) => r.epoch || 1],  // shown when the run has epochs (epochsShown)
    ["level", "level", (r) => r.level],
    ["status", "status", (r) => r.status],
    ["correct", "verdict", verdict],
    ["error_kind", "error kind", (r) => r.error_kind || ""],
    ["answer", "answer", (r) => r.answer || ""],
    ["target", "target", (r) => r.target || ""],
    ["tokens", "tokens", tokens],
    ["cost", "cost", cost],
    ["duration_s", "seconds", (r) => r.duration_s || 0],
    ["steps", "steps", (r) => r.steps || 0],
  ];
  function fillSelect(sel, values) {
    const el = $(sel), keep = el.value;
    const first = el.options[0].outerHTML;
    el.innerHTML = first + values.map((v) => `<option value="${esc(v)}">${esc(v)}</option>`).join("");
    if (values.map(String).includes(keep)) el.value = keep;
  }
  function renderFilters(run) {
    const uniq = (f) => Array.from(new Set(run.rows.map(f).filter((v) => v !== null && v !== undefined && v !== ""))).sort();
    fillSelect("#f-status", uniq((r) => r.status));
    fillSelect("#f-level", uniq((r) => r.level === null || r.level === undefined ? "" : String(r.level)));
    fillSelect("#f-error", uniq((r) => r.error_kind));
    const cmp = compareFor();
    $("#f-compare").style.display = cmp && cmp.compared ? "" : "none";
    if (!(cmp && cmp.compared)) $("#f-compare").value = "";
  }
  function filtered(run) {
    const text = $("#f-text").value.trim().toLowerCase();
    const st = $("#f-status").value, co = $("#f-correct").value, lv = $("#f-level").value,
          ek = $("#f-error").value, ch = $("#f-compare").value;
    let rows = run.rows.filter((r) =>
      (!st || r.status === st) && (!co || verdict(r) === co) && (!lv || String(r.level) === lv) &&
      (!ek || r.error_kind === ek) && (!ch || changeOf(r) === ch) &&
      (!text || [r.instance_id, r.answer, r.target, r.error].some((v) => v && String(v).toLowerCase().includes(text))));
    if (sortKey !== null) {
      const f = COLS[sortKey][2];
      rows = rows.slice().sort((a, b) => {
        const x = f(a), y = f(b);
        if (typeof x === "number" && typeof y === "number") return (x - y) * sortDir;
        return String(x === null || x === undefined ? "" : x).localeCompare(String(y === null || y === undefined ? "" : y)) * sortDir;
      });
    }
    return rows;
  }
  const epochsShown = (run) => run.rows.some((r) => (r.epoch || 1) > 1);
  function renderTable() {
    const run = DATA.runs[current];
    const withEpoch = epochsShown(run);
    $("#rows thead").innerHTML = "<tr>" + COLS.map((c, k) => c[0] === "epoch" && !withEpoch ? "" :
      `<th data-col="${k}">${esc(c[1])}${sortKey === k ? (sortDir > 0 ? " ▲" : " ▼") : ""}</th>`).join("") + "</tr>";
    const rows = filtered(run);
    const priced = !notPriced(run);
    const parts = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i], v = verdict(r);
      parts[i] = `<tr data-id="${esc(r.instance_id)}"${r.instance_id === openId ? ' class="selected"' : ""}>` +
        `<td class="id" title="${esc(r.instance_id)}">${esc(r.instance_id)}</td>${withEpoch ? `<td>${esc(r.epoch || 1)}</td>` : ""}<td>${esc(r.level)}</td>` +
        `<td class="st-${esc(r.status)}">${esc(r.status)}${r.limit ? " (" + esc(r.limit) + ")" : ""}</td>` +
        `<td class="${v === "correct" ? "yes" : v === "wrong" ? "no" : ""}">${v}</td>` +
        `<td>${esc(r.error_kind || "")}</td><td class="txt" title="${esc(r.answer)}">${esc(r.answer)}</td>` +
        `<td class="txt" title="${esc(r.target)}">${esc(r.target)}</td><td>${tokens(r)}</td>` +
        `<td>${priced ? num(cost(r), 4) : "not priced"}</td><td>${num(r.duration_s, 1)}</td><td>${esc(r.steps)}</td></tr>`;
    }
    $("#rows tbody").innerHTML = parts.join("");
    $("#row-count").textContent = `${rows.length} of ${run.rows.length} rows`;
    $("#row-count").dataset.shown = rows.length;
    $("#row-count").dataset.total = run.rows.length;
  }

  // ---------- trace ----------
  function pre(text) { return `<pre>${esc(text)}</pre>`; }
  function json(v) { return pre(typeof v === "string" ? v : JSON.stringify(v, null, 2)); }
  function shotUrl(run, row, name) {
    if (MODE !== "live" || !row.trace) return null;
    return `/api/shot?run=${current}&trace=${encodeURIComponent(row.trace)}&name=${encodeURIComponent(name)}`;
  }
  function renderEvent(ev, run, row) {
    // the parent appends `verdict` (and a kill's `limit`) from outside the tracer: no time of its own
    const t = ev.t !== undefined && ev.type !== "verdict" ? `t=${num(ev.t, 2)}s ` : "";
    const head = (what) => `<div class="head">${t}<b>${esc(ev.type)}</b> ${what || ""}</div>`;
    let body = "";
    switch (ev.type) {
      case "task": body = head() + pre(ev.task); break;
      case "system_prompt": body = head("from " + esc(ev.source)) + pre(ev.content); break;
      case "tools": {
        const names = (ev.tools || []).map((d) => (d.function || {}).name);
        body = head(`${names.length} offered`) + `<details><summary>${esc(names.join(", "))}</summary>${json(ev)}</details>`;
        break;
      }
      case "message": body = head("from " + esc(ev.source)) + pre(ev.content); break;
      case "model_call_started": body = head(`${esc(ev.model)} timeout ${esc(ev.timeout)}s`); break;
      case "model_call": {
        const u = ev.usage || {};
        body = head(`${esc(ev.model)} · ${num(ev.seconds, 2)}s · ${esc(u.prompt_tokens || 0)} in / ${esc(u.completion_tokens || 0)} out`);
        if (ev.messages && ev.messages.length) body += `<details><summary>${ev.n_messages !== undefined && ev.n_messages !== null ? esc(ev.n_messages) + " messages sent, " : ""}${ev.messages.length} new to this trace</summary>${json(ev.messages)}</details>`;
        else if (ev.n_messages) body += `<div class="muted">${esc(ev.n_messages)} messages sent (all earlier in this trace)</div>`;
        if (ev.content) body += pre(ev.content);
        if (ev.tool_calls) body += `<div class="muted">tool calls</div>` + json(ev.tool_calls);
        break;
      }
      case "tool_call": body = head(`<b>${esc(ev.name)}</b> by ${esc(ev.source)} ${esc(ev.call_id)}`) + json(ev.arguments || {}); break;
      case "tool_result": body = head(`${esc(ev.name)}${ev.is_error ? ' <span class="no">error</span>' : ""}`) + pre(ev.content); break;
      case "env": {
        body = head(`${esc(ev.env)}.${esc(ev.action)} · <span class="${ev.outcome === "ok" ? "yes" : "no"}">${esc(ev.outcome)}</span> · ${num(ev.seconds, 2)}s`);
        if (ev.args && Object.keys(ev.args).length) body += json(ev.args);
        if (ev.result !== undefined) body += pre(ev.result);
        if (ev.action === "screenshot") {
          const m = /([\w.-]+\.png)/.exec(String(ev.result || ""));
          if (m) {
            const url = shotUrl(run, row, m[1]);
            body += url ? `<img class="shot" alt="screenshot ${esc(m[1])}" src="${url}">` : `<div class="muted">screenshot ${esc(m[1])} (shown in harness view)</div>`;
          }
        }
        break;
      }
      case "user_reply": body = head("#" + esc(ev.number)) + pre(ev.content); break;
      case "limit": body = head(esc(ev.limit)) + pre(ev.detail || ""); break;
      case "error": body = head(esc(ev.kind)) + pre(ev.message) + (ev.traceback ? `<details><summary>traceback</summary>${pre(ev.traceback)}</details>` : ""); break;
      case "verdict": {
        // the parent's verdict after scoring (source run / rescore): what each scorer compared
        const ok = ev.correct === true, none = ev.correct === null || ev.correct === undefined;
        body = head(`${esc(ev.source || "")} · ${esc(ev.status || "")} · <span class="${ok ? "yes" : none ? "" : "no"}">${ok ? "correct" : none ? "no verdict" : "wrong"}</span>`);
        if ("answer" in ev || "target" in ev)
          body += `<div><b>answer</b> ${esc(ev.answer)} <span class="muted">(${esc(ev.answer_source || "")})</span> · <b>target</b> ${esc(ev.target)}</div>`;
        Object.entries(ev.scores || {}).forEach(([name, sc]) => {
          sc = sc || {};
          body += `<div><b>${esc(name)}</b>: <span class="${sc.correct ? "yes" : "no"}">${sc.correct ? "correct" : sc.correct === false ? "wrong" : "no verdict"}</span> ${esc(sc.explanation || "")}</div>`;
          if (sc.details && Object.keys(sc.details).length) body += json(sc.details);
        });
        const rest = Object.assign({}, ev);
        ["type", "t", "source", "status", "answer", "answer_source", "target", "correct", "scores"].forEach((k) => delete rest[k]);
        if (Object.keys(rest).length) body += json(rest);
        break;
      }
      case "stderr": body = head(`${esc(ev.source || "")} · exit ${esc(ev.exit_code)}${ev.omitted ? ` · its first ${esc(ev.omitted)} characters cut` : ""}`) + pre(ev.content); break;
      case "judge_call": {
        // a judge model's call (runner/appends.py; Gaia2's judge in the sandbox): what it was sent, what it said
        body = head(`${esc(ev.judge || "")}${ev.model ? " · " + esc(ev.model) : ""}${ev.error ? ' · <span class="no">failed</span>' : ""}`);
        if (ev.messages && ev.messages.length) body += `<details><summary>${ev.messages.length} message(s) sent to the judge</summary>${json(ev.messages)}</details>`;
        body += ev.error ? pre(ev.error) : pre(ev.reply || "");
        break;
      }
      case "truncated": body = head() + pre(ev.detail); break;
      default: {
        const rest = Object.assign({}, ev); delete rest.type; delete rest.t;
        body = head() + json(rest);
      }
    }
    return `<div class="ev ev-${esc(ev.type)}">${body}</div>`;
  }
  function rowSummary(row) {
    const v = verdict(row);
    if (row.status === "running")
      return `<div class="summary-box running"><b>${esc(row.instance_id)}</b> · level ${esc(row.level)} · <span class="st-running">running</span> (attempt ${esc(row.attempt)}) · <span class="muted">the trace as written so far, refreshed every second · trace ${esc(row.trace)}</span></div>`;
    const summary = ((DATA || {}).runs || [])[current] ? DATA.runs[current].summary || {} : {};
    const words = summary.words || {};
    const level = (words.groups || "level") === "level" ? ` · level ${esc(row.level)}` : "";
    let h = `<div class="summary-box ${row.status === "error" || v === "wrong" ? "bad" : ""}"><b>${esc(row.instance_id)}</b>${level} · <span class="st-${esc(row.status)}">${esc(row.status)}</span> · ${v}`;
    if (row.status === "error") h += `<div><b>error (${esc(row.error_kind)})</b>${pre(row.error)}</div>`;
    if (row.limit) h += `<div><b>limit</b> ${esc(row.limit)}</div>`;
    const target = words.target === "" ? "" : ` · <b>${esc(words.target || "target")}</b> ${esc(row.target)}`;
    h += `<div><b>answer</b> ${esc(row.answer)} <span class="muted">(${esc(row.answer_source)})</span>${target}</div>`;
    const note = (summary.verdict_notes || {})[row.instance_id];  // the benchmark's verdict (Harbor: the verifier's)
    if (note) h += `<div class="verdict-note"><b>verdict</b> ${esc(note)}</div>`;
    Object.entries(row.scores || {}).forEach(([name, sc]) => {
      h += `<div><b>scorer ${esc(name)}</b>: ${sc.correct ? '<span class="yes">correct</span>' : '<span class="no">wrong</span>'} ${esc(sc.explanation || "")}</div>`;
      const said = (sc.details || {}).reply;  // the judge's words (its prompt: the trace's judge_call)
      if (said) h += `<details class="judge-reply"><summary>the judge's reply</summary>${pre(said)}</details>`;
    });
    if ((row.verdicts || {}).gaia2) h += gaia2Verdict(row.verdicts.gaia2);
    h += `<div class="muted">tools: ${esc((row.tool_calls || []).join(", "))} · ${row.steps} steps · ${num(row.duration_s, 1)}s · trace ${esc(row.trace)}</div></div>`;
    return h;
  }
  function showTrace(events, run, row) {  // #trace's data-id: the row whose trace is shown whole
    $("#trace").innerHTML = rowSummary(row) + (events === null ? `<p class="muted">no trace file</p>`
      : events.map((ev) => renderEvent(ev, run, row)).join(""));
    $("#trace").dataset.id = row.instance_id;
  }
  function showLoading(row) {  // at once, so the trace shown is never the row opened before
    $("#trace").innerHTML = rowSummary(row) + `<p class="muted">loading trace…</p>`;
    delete $("#trace").dataset.id;
  }
  async function inflate(packed) {  // base64 of gzipped JSON (html.py pack_trace)
    const bytes = Uint8Array.from(atob(packed), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }
  let openStatus = null;  // the opened row's status: a running row's trace streams until it ends
  async function streamTrace(iid, shown) {
    if (openId !== iid || MODE !== "live") return;
    const run = DATA.runs[current];
    const row = run.rows.find((r) => r.instance_id === iid);
    if (!row || row.status !== "running") return;  // it ended: renderAll reopens it with its row
    try {
      const resp = await fetch(`/api/trace?run=${current}&id=${encodeURIComponent(iid)}`);
      const events = resp.ok ? await resp.json() : null;
      if (openId === iid && events && events.length !== shown) {
        const box = $("#trace"), atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
        showTrace(events, run, row);
        if (atEnd) box.scrollTop = box.scrollHeight;
        shown = events.length;
      }
    } catch (e) { /* the viewer went away: poll() says so */ }
    setTimeout(() => streamTrace(iid, shown), 1000);
  }
  async function openRow(iid) {
    openId = iid;
    document.querySelectorAll("#rows tbody tr.selected").forEach((tr) => tr.classList.remove("selected"));
    const tr = document.querySelector(`#rows tbody tr[data-id="${CSS.escape(iid)}"]`);
    if (tr) tr.classList.add("selected");
    const run = DATA.runs[current];
    const row = run.rows.find((r) => r.instance_id === iid);
    if (!row) return;
    showLoading(row);
    if (MODE === "live") {
      const resp = await fetch(`/api/trace?run=${current}&id=${encodeURIComponent(iid)}`);
      const events = resp.ok ? await resp.json() : null;
      if (openId !== iid) return;
      showTrace(events, run, row);
      openStatus = row.status;
      if (row.status === "running") setTimeout(() => streamTrace(iid, events ? events.length : 0), 1000);
    } else {
      const packed = (run.traces || {})[iid];
      const events = packed ? await inflate(packed) : null;
      if (openId === iid) showTrace(events, run, row);  // another row opened meanwhile: its trace, not this one
    }
  }

  // ---------- wiring ----------
  function renderTabs() {
    if (DATA.runs.length < 2) { $("#run-tabs").innerHTML = ""; return; }
    $("#run-tabs").innerHTML = DATA.runs.map((r, k) =>
      `<button data-run="${k}" class="${k === current ? "active" : ""}">${esc(r.name)}</button>`).join("");
  }
  function renderAll() {
    const k = DATA.runs.findIndex((r) => r.path === currentPath);
    current = k >= 0 ? k : current < DATA.runs.length ? current : 0;
    renderRuns();
    if (!DATA.runs.length) {  // live: waiting for a run to appear
      $("#run-tabs").innerHTML = ""; $("#comparison").innerHTML = "";
      $("#overview").innerHTML = `<p class="muted">no run yet</p>`; $("#instances").style.display = "none";
      document.body.dataset.ready = "1";
      return;
    }
    $("#instances").style.display = "";
    const run = DATA.runs[current];
    currentPath = run.path;
    renderTabs(); renderComparison(); renderOverview(run); renderFilters(run); renderTable();
    const open = openId && run.rows.find((r) => r.instance_id === openId);
    if (open && openStatus === "running" && open.status !== "running") openRow(openId);  // it ended: its row and whole trace
    document.body.dataset.ready = "1";
  }
  function showRun(k) {
    current = k; currentPath = DATA.runs[k].path; openId = null;
    $("#trace").innerHTML = '<p class="muted">Click an instance to see its trace.</p>';
    delete $("#trace").dataset.id;
    renderAll();
  }
  document.addEventListener("click", (e) => {
    const tab = e.target.closest("#run-tabs button");
    if (tab) { showRun(Number(tab.dataset.run)); return; }
    const listed = e.target.closest("#runs-table tbody tr");
    if (listed) { showRun(Number(listed.dataset.run)); return; }
    const running = e.target.closest("a.running-id");
    if (running) { e.preventDefault(); openRow(running.dataset.id); return; }
    const th = e.target.closest("#rows th");
    if (th) { const k = Number(th.dataset.col); sortDir = sortKey === k ? -sortDir : 1; sortKey = k; renderTable(); return; }
    const tr = e.target.closest("#rows tbody tr");
    if (tr) openRow(tr.dataset.id);
  });
  ["#f-text", "#f-status", "#f-correct", "#f-level", "#f-error", "#f-compare"].forEach((s) =>
    $(s).addEventListener(s === "#f-text" ? "input" : "change", renderTable));
  document.addEventListener("change", (e) => {  // live: the baseline is the user's choice
    if (e.target.id === "baseline") { baseline = e.target.value; fetchData(); }
    if (e.target.id === "cmp-force") { force = e.target.checked; fetchData(); }
  });

  async function fetchData() {
    const q = new URLSearchParams();
    if (baseline !== "") q.set("baseline", baseline);
    if (force !== null) q.set("force", force ? "1" : "0");
    const resp = await fetch("/api/data" + (q.toString() ? "?" + q : ""));
    DATA = await resp.json();
    renderAll();
  }
  async function poll() {
    try {
      const resp = await fetch("/api/version");
      const v = await resp.text();
      if (version !== null && v !== version) {
        await fetchData();
        $("#live-status").textContent = "updated " + new Date().toLocaleTimeString();
      }
      version = v;
    } catch (e) {
      $("#live-status").textContent = "viewer not reachable";
    }
    setTimeout(poll, 1000);
  }
  if (MODE === "live") {
    $("#live-status").textContent = "live";
    fetch("/api/version").then((r) => r.text()).then((v) => { version = v; }).then(fetchData).then(() => setTimeout(poll, 1000));
  } else {
    DATA = JSON.parse(document.getElementById("report-data").textContent);
    renderAll();
  }
})();
