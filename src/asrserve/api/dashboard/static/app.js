// asrserve dashboard: polls /v1/dashboard/stats about once a second and draws it.
// Hand-written, no dependencies. Rates come from deltas of the scheduler's cumulative
// counters between two polls, over the server's monotonic clock (`now`).
"use strict";

(function () {
  const POLL_MS = 1000;
  const WINDOW_S = 120; // seconds of history on the time-series charts
  const RATE_WINDOW_S = 5; // the headline throughput averages this many seconds
  const PRIORITIES = [
    { key: "0", name: "interactive", color: "#2f6fde" },
    { key: "1", name: "async", color: "#1f9d55" },
    { key: "2", name: "offline (Batch API)", color: "#c98a00" },
  ];
  const PALETTE = ["#2f6fde", "#d14343", "#1f9d55", "#c98a00", "#8a4fd1", "#138a8a", "#c2417a", "#5b6272"];

  const $ = (id) => document.getElementById(id);

  // Everything derived from successive polls; reset when the server's counters go back.
  const state = {
    polls: 0,
    last: null, // previous snapshot: {now, audio, busy: {device: s}}
    busy: {}, // device -> [{t, dt, busy}] (busy in seconds within the interval ending at t)
    rates: [], // [{t, dt, audio}] audio seconds credited in the interval ending at t
    throughput: [], // [{t, v}] RATE_WINDOW_S average at t
    queue: [], // [{t, q: {key: chunks}}]
    maxThroughput: 0,
    maxBusy: 0,
  };
  window.asrDashboard = state; // for tests and for poking at it from the console

  // --- formatting ---------------------------------------------------------------------

  function num(value, digits) {
    return typeof value === "number" && isFinite(value) ? value.toFixed(digits) : "–";
  }

  function seconds(value) {
    if (typeof value !== "number" || !isFinite(value)) return "–";
    if (value < 10) return value.toFixed(2) + " s";
    if (value < 600) return value.toFixed(1) + " s";
    return (value / 60).toFixed(1) + " min";
  }

  function duration(total) {
    if (typeof total !== "number" || !isFinite(total)) return "–";
    if (total < 120) return total.toFixed(1) + " s";
    if (total < 7200) return (total / 60).toFixed(1) + " min";
    return (total / 3600).toFixed(2) + " h";
  }

  // Transcript timestamps: mm:ss.cc, or h:mm:ss.cc past an hour.
  function stamp(value) {
    const centis = Math.max(0, Math.round(value * 100));
    const h = Math.floor(centis / 360000);
    const m = Math.floor((centis % 360000) / 6000);
    const s = Math.floor((centis % 6000) / 100);
    const c = centis % 100;
    const two = (n) => String(n).padStart(2, "0");
    return (h ? h + ":" : "") + two(m) + ":" + two(s) + "." + two(c);
  }

  function clock(epoch) {
    if (typeof epoch !== "number") return "–";
    return new Date(epoch * 1000).toLocaleTimeString([], { hour12: false });
  }

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (name === "text") node.textContent = value;
      else if (name === "class") node.className = value;
      else node.setAttribute(name, value);
    }
    for (const child of children || []) node.appendChild(child);
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function deviceColor(device) {
    const names = Object.keys(state.busy).sort();
    const index = Math.max(0, names.indexOf(device));
    return PALETTE[index % PALETTE.length];
  }

  // --- deriving series from the counters ----------------------------------------------

  function trim(series, now) {
    while (series.length && series[0].t < now - WINDOW_S - 5) series.shift();
  }

  // A batch's compute time is added to the counter when the batch ends, so a 3 s batch
  // shows up as 3 s in one 1 s interval. Spread it back over the intervals before, each
  // filled up to 100 %, which is when the device was actually running it.
  function creditBusy(points, seconds) {
    let left = seconds;
    for (let i = points.length - 1; i >= 0 && left > 1e-9; i--) {
      const room = Math.max(points[i].dt - points[i].busy, 0);
      const add = Math.min(room, left);
      points[i].busy += add;
      left -= add;
    }
  }

  function ingest(data) {
    const sched = data.scheduler || {};
    const now = data.now;
    const audio = typeof sched.audio_seconds === "number" ? sched.audio_seconds : 0;
    const busy = sched.device_busy_seconds || {};
    const last = state.last;
    const restarted =
      last && (now <= last.now || audio < last.audio ||
        Object.keys(busy).some((d) => (last.busy[d] || 0) > busy[d]));
    if (restarted) {
      state.busy = {};
      state.rates = [];
      state.throughput = [];
      state.queue = [];
    }
    if (last && !restarted) {
      const dt = now - last.now;
      for (const device of Object.keys(busy)) {
        const points = state.busy[device] || (state.busy[device] = []);
        points.push({ t: now, dt: dt, busy: 0 });
        creditBusy(points, Math.max(busy[device] - (last.busy[device] || 0), 0));
        trim(points, now);
      }
      state.rates.push({ t: now, dt: dt, audio: Math.max(audio - last.audio, 0) });
      trim(state.rates, now);
      let audioSum = 0;
      let timeSum = 0;
      for (let i = state.rates.length - 1; i >= 0 && timeSum < RATE_WINDOW_S; i--) {
        audioSum += state.rates[i].audio;
        timeSum += state.rates[i].dt;
      }
      const rate = timeSum > 0 ? audioSum / timeSum : 0;
      state.throughput.push({ t: now, v: rate });
      trim(state.throughput, now);
      state.maxThroughput = Math.max(state.maxThroughput, rate);
    }
    const queued = sched.queued_items || {};
    const q = {};
    for (const p of PRIORITIES) q[p.key] = Math.max(queued[p.key] || 0, 0);
    state.queue.push({ t: now, q: q });
    trim(state.queue, now);
    state.last = { now: now, audio: audio, busy: Object.assign({}, busy) };
    state.polls += 1;
  }

  // --- charts -------------------------------------------------------------------------

  function setupCanvas(canvas) {
    const ratio = window.devicePixelRatio || 1;
    const width = Math.max(canvas.clientWidth, 50);
    const height = Math.max(canvas.clientHeight, 50);
    if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(height * ratio);
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    return { ctx: ctx, width: width, height: height };
  }

  // The top of a y axis with four round gridline steps above 0.
  function niceMax(value) {
    if (!(value > 0)) return 1;
    const quarter = value / 4;
    const power = Math.pow(10, Math.floor(Math.log10(quarter)));
    for (const step of [1, 2, 2.5, 5, 10]) if (quarter <= step * power) return 4 * step * power;
    return 40 * power;
  }

  function tick(v) {
    return Number.isInteger(v) ? String(v) : v.toFixed(v < 1 ? 2 : 1);
  }

  // series: [{color, points: [{t0, t1, v}]}]; steps, so an idle interval reads as a flat 0.
  function drawSteps(canvas, series, opts) {
    const { ctx, width, height } = setupCanvas(canvas);
    const pad = { left: 44, right: 8, top: 8, bottom: 18 };
    const plotW = width - pad.left - pad.right;
    const plotH = height - pad.top - pad.bottom;
    const now = opts.now;
    const x = (t) => pad.left + plotW * (1 - (now - t) / WINDOW_S);
    let top = opts.yMax;
    if (top === undefined) {
      let peak = 0;
      for (const s of series) for (const p of s.points) peak = Math.max(peak, p.v);
      top = niceMax(peak);
    }
    const y = (v) => pad.top + plotH * (1 - Math.min(v, top) / top);

    ctx.font = "11px system-ui, sans-serif";
    ctx.lineWidth = 1;
    ctx.strokeStyle = "#e3e6ec";
    ctx.fillStyle = "#6b7385";
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let i = 0; i <= 4; i++) {
      const v = (top * i) / 4;
      ctx.beginPath();
      ctx.moveTo(pad.left, Math.round(y(v)) + 0.5);
      ctx.lineTo(width - pad.right, Math.round(y(v)) + 0.5);
      ctx.stroke();
      ctx.fillText(opts.format(v), pad.left - 6, y(v));
    }
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (let ago = WINDOW_S; ago >= 0; ago -= 30) {
      const at = Math.min(Math.max(x(now - ago), pad.left + 16), width - pad.right - 12);
      ctx.fillText(ago ? "-" + ago + " s" : "now", at, height - pad.bottom + 4);
    }

    ctx.save();
    ctx.beginPath();
    ctx.rect(pad.left, pad.top - 1, plotW, plotH + 2);
    ctx.clip();
    let drawn = 0;
    for (const s of series) {
      if (!s.points.length) continue;
      ctx.beginPath();
      ctx.moveTo(x(s.points[0].t0), y(s.points[0].v));
      for (const p of s.points) {
        ctx.lineTo(x(p.t0), y(p.v));
        ctx.lineTo(x(p.t1), y(p.v));
      }
      ctx.strokeStyle = s.color;
      ctx.lineWidth = 1.75;
      ctx.stroke();
      if (series.length === 1 || opts.fill) {
        ctx.lineTo(x(s.points[s.points.length - 1].t1), y(0));
        ctx.lineTo(x(s.points[0].t0), y(0));
        ctx.closePath();
        ctx.globalAlpha = 0.12;
        ctx.fillStyle = s.color;
        ctx.fill();
        ctx.globalAlpha = 1;
      }
      drawn = Math.max(drawn, s.points.length);
    }
    ctx.restore();
    if (!drawn) {
      ctx.fillStyle = "#6b7385";
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      ctx.font = "12px system-ui, sans-serif";
      ctx.fillText("collecting…", pad.left + plotW / 2, pad.top + plotH / 2);
    }
    canvas.dataset.points = String(drawn);
  }

  function renderBusy(now) {
    const canvas = $("busy-chart");
    const series = Object.keys(state.busy)
      .sort()
      .map((device) => ({
        device: device,
        color: deviceColor(device),
        points: state.busy[device].map((p) => ({ t0: p.t - p.dt, t1: p.t, v: p.dt > 0 ? (100 * p.busy) / p.dt : 0 })),
      }));
    drawSteps(canvas, series, { now: now, yMax: 100, format: (v) => v.toFixed(0) + "%" });
    for (const s of series) for (const p of s.points) state.maxBusy = Math.max(state.maxBusy, p.v);
    canvas.dataset.max = state.maxBusy.toFixed(1);

    const fractions = (state.lastData && state.lastData.scheduler.device_busy_fraction) || {};
    const legend = $("busy-legend");
    legend.replaceChildren(
      ...series.map((s) => {
        const latest = s.points.length ? s.points[s.points.length - 1].v : 0;
        const overall = fractions[s.device];
        const label = s.device + ": " + latest.toFixed(0) + "% now" +
          (typeof overall === "number" ? ", " + (100 * overall).toFixed(1) + "% since start" : "");
        return el("span", {}, [el("span", { class: "swatch", style: "background:" + s.color }), document.createTextNode(label)]);
      })
    );
  }

  function renderThroughput(now) {
    const points = state.throughput.map((p, i, all) => ({ t0: i ? all[i - 1].t : p.t - 1, t1: p.t, v: p.v }));
    drawSteps($("throughput-chart"), [{ color: "#2f6fde", points: points }], { now: now, format: tick });
    const latest = state.throughput.length ? state.throughput[state.throughput.length - 1].v : 0;
    const node = $("throughput");
    node.textContent = state.throughput.length ? latest.toFixed(2) : "–";
    node.dataset.value = latest.toFixed(3);
    node.dataset.max = state.maxThroughput.toFixed(3);
  }

  function renderBatches(sched) {
    const chart = $("batch-chart");
    const sizes = Object.entries(sched.batch_sizes || {})
      .map(([size, count]) => [Number(size), Number(count)])
      .filter(([, count]) => count > 0)
      .sort((a, b) => a[0] - b[0]);
    const width = Math.max(chart.clientWidth, 100);
    const height = Math.max(chart.clientHeight, 100);
    chart.setAttribute("viewBox", "0 0 " + width + " " + height);
    const nodes = [];
    if (!sizes.length) {
      nodes.push(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "empty" }, "no batches yet"));
    } else {
      const pad = { left: 8, right: 8, top: 16, bottom: 30 };
      const plotH = height - pad.top - pad.bottom;
      const slot = (width - pad.left - pad.right) / sizes.length;
      const barW = Math.max(Math.min(slot * 0.7, 48), 2);
      const peak = Math.max(...sizes.map(([, count]) => count));
      sizes.forEach(([size, count], i) => {
        const h = Math.max((plotH * count) / peak, 1);
        const cx = pad.left + slot * (i + 0.5);
        const bar = svg("rect", { class: "bar", x: cx - barW / 2, y: pad.top + plotH - h, width: barW, height: h, rx: 2, "data-size": size, "data-count": count });
        bar.appendChild(svg("title", {}, count + " batch" + (count === 1 ? "" : "es") + " of " + size));
        nodes.push(bar);
        nodes.push(svg("text", { x: cx, y: pad.top + plotH - h - 4, "text-anchor": "middle" }, String(count)));
        nodes.push(svg("text", { x: cx, y: height - pad.bottom + 14, "text-anchor": "middle" }, String(size)));
      });
      nodes.push(svg("text", { x: width / 2, y: height - 2, "text-anchor": "middle" }, "chunks per batch"));
    }
    chart.replaceChildren(...nodes);
    chart.dataset.bars = String(sizes.length);
  }

  function renderQueue(sched, now) {
    const items = sched.queued_items || {};
    const audio = sched.queued_audio_seconds || {};
    const peak = Math.max(1, ...PRIORITIES.map((p) => items[p.key] || 0));
    $("queue").replaceChildren(
      ...PRIORITIES.map((p) => {
        const chunks = Math.max(items[p.key] || 0, 0);
        const fill = el("div", { class: "fill", style: "width:" + (100 * chunks) / peak + "%;background:" + p.color });
        return el("div", { class: "row", id: "queue-" + p.name, "data-chunks": String(chunks) }, [
          el("span", { class: "name" }, [
            el("span", { class: "swatch", style: "background:" + p.color }),
            document.createTextNode(p.name),
          ]),
          el("div", { class: "track" }, [fill]),
          el("span", { class: "count", text: chunks + " chunk" + (chunks === 1 ? "" : "s") + " · " + duration(audio[p.key] || 0) }),
        ]);
      })
    );
    const series = PRIORITIES.map((p) => ({
      color: p.color,
      points: state.queue.map((s, i, all) => ({ t0: i ? all[i - 1].t : s.t - 1, t1: s.t, v: s.q[p.key] })),
    }));
    drawSteps($("queue-chart"), series, { now: now, format: tick });
    const windows = Object.entries(sched.pending_by_window || {});
    $("pending-windows").textContent = windows.length
      ? "pending by encoder window: " + windows.map(([w, n]) => w + " × " + n).join(" · ")
      : "";
  }

  function renderLatency(latency) {
    latency = latency || {};
    for (const q of ["p50", "p95", "p99"]) $("latency-" + q).textContent = seconds(latency[q]);
    $("latency-count").textContent = latency.count
      ? "over the last " + latency.count + " succeeded job" + (latency.count === 1 ? "" : "s") + " of the " + latency.window + " most recent"
      : "no finished jobs yet";
  }

  // A running job's windows done, e.g. "3/5"; its estimated time left as a tooltip.
  function progress(job) {
    const p = job.progress;
    if (job.status !== "running" || !p || !p.chunks_total) return el("span", {});
    return el("span", { class: "mono", text: " " + p.chunks_done + "/" + p.chunks_total, title: eta(job) });
  }

  function eta(job) {
    const p = job.progress;
    return p && p.eta_s !== null && job.status === "running" ? "about " + Math.ceil(p.eta_s) + " s left" : "";
  }

  function renderJobs(jobs) {
    const body = $("jobs").tBodies[0];
    if (!jobs || !jobs.length) {
      body.replaceChildren(el("tr", { class: "empty" }, [el("td", { colspan: "8", text: "no jobs yet" })]));
      return;
    }
    body.replaceChildren(
      ...jobs.map((job) => {
        const failed = job.error && job.error.message;
        return el("tr", { "data-id": job.id, "data-status": job.status }, [
          el("td", { class: "mono", text: clock(job.created_at) }),
          el("td", { class: "mono", text: job.id.replace(/^job_/, "").slice(-10), title: job.id }),
          el("td", {}, [el("span", { class: "pill st-" + job.status, text: job.status, title: eta(job) }), progress(job)]),
          el("td", { text: job.priority }),
          el("td", { text: job.filename || "–" }),
          el("td", { class: "num", text: seconds(job.audio_duration) }),
          el("td", { class: "num", text: seconds(job.latency_s) }),
          el("td", { class: failed ? "text err" : "text", text: failed ? job.error.message : job.text || "" }),
        ]);
      })
    );
  }

  // A served model, the memory its weights take on each device, and where they are loaded.
  function modelFact(m) {
    const mib = Math.round(m.weights_bytes / 1048576) + " MiB";
    const where = m.loaded_on.length ? m.loaded_on.join(" ") : "unloaded";
    return m.id + " (" + mib + " · " + where + ")";
  }

  function renderFacts(data) {
    const sched = data.scheduler || {};
    const status = $("status");
    status.textContent = data.ready ? "ready" : "loading model";
    status.className = "pill " + (data.ready ? "pill-ok" : "pill-wait");
    $("model").textContent = sched.models
      ? sched.models.map(modelFact).join(", ")
      : data.model || "–";
    $("policy").textContent = sched.policy || "–";
    // The engine that runs and why it was chosen (GET /v1/scheduler "engine_choice").
    const choice = sched.engine_choice;
    $("engine").textContent = sched.engine || "–";
    $("engine").title = choice ? choice.configured + ": " + choice.reason : "";
    $("max-batch").textContent = sched.max_batch_size ?? "–";
    $("encoder-window").textContent = sched.encoder_window || "–";
    $("devices").textContent = (sched.devices || []).join(", ") || "–";
    $("audio-total").textContent = duration(sched.audio_seconds);
    $("batches").textContent = sched.batches === undefined ? "–" : sched.batches + " · " + num(sched.mean_batch_size, 2);
    $("pending").textContent = sched.pending_chunks === undefined ? "–" : sched.pending_chunks + " · " + sched.jobs_in_flight;
    $("waste").textContent =
      sched.padding_waste === undefined ? "–" : (100 * sched.padding_waste).toFixed(1) + "% · " + seconds(sched.mean_queue_wait_s);
    renderCapacity(sched);
    renderLayout(sched.layout);
  }

  // How the CPU cores are shared out (GET /v1/scheduler "layout"), and how it was chosen.
  function renderLayout(layout) {
    $("layout").textContent = layout ? layout.replicas + " × " + layout.threads : "–";
    $("layout-source").textContent = layout ? layout.source : "";
  }

  // What the preprocessing pool and the devices could each do with every thread or device
  // busy (GET /v1/scheduler "preprocessing".capacity, "devices_capacity"), and the smaller.
  function renderCapacity(sched) {
    const pool = sched.preprocessing || {};
    $("capacity").textContent = num(pool.capacity, 1) + " · " + num(sched.devices_capacity, 1);
    $("bound").textContent = sched.bound
      ? sched.bound + "-bound · " + (pool.threads ?? "–") + " preprocessing threads"
      : "";
  }

  function render() {
    const data = state.lastData;
    if (!data) return;
    const sched = data.scheduler || {};
    renderFacts(data);
    renderBusy(data.now);
    renderThroughput(data.now);
    renderBatches(sched);
    renderQueue(sched, data.now);
    renderLatency(data.latency);
    renderJobs(data.jobs);
  }

  // --- polling ------------------------------------------------------------------------

  function showPollError(message) {
    const banner = $("poll-error");
    banner.hidden = !message;
    banner.textContent = message ? "stats unavailable: " + message : "";
    if (message) {
      $("status").textContent = "offline";
      $("status").className = "pill pill-bad";
    }
  }

  async function apiError(response) {
    try {
      const body = await response.json();
      if (body && body.error && body.error.message) return body.error.message + " (HTTP " + response.status + ")";
    } catch (_) {
      // not JSON: fall through to the status line
    }
    return "HTTP " + response.status + " " + response.statusText;
  }

  // With auth on, the stats need an admin key: asked for once, kept for this tab only.
  const KEY_ITEM = "asrserve-api-key";

  function authHeaders() {
    const key = sessionStorage.getItem(KEY_ITEM);
    return key ? { Authorization: "Bearer " + key } : {};
  }

  function askForKey(status) {
    const entered = window.prompt(
      status === 403 ? "This key is not an admin key. Admin API key:" : "API key (admin) for this server:"
    );
    if (entered) sessionStorage.setItem(KEY_ITEM, entered.trim());
    return Boolean(entered);
  }

  async function poll() {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), 5000);
    try {
      const response = await fetch("/v1/dashboard/stats", {
        cache: "no-store",
        signal: abort.signal,
        headers: authHeaders(),
      });
      if ((response.status === 401 || response.status === 403) && !state.asked) {
        state.asked = true;
        if (askForKey(response.status)) state.asked = false;
      }
      if (!response.ok) throw new Error(await apiError(response));
      const data = await response.json();
      ingest(data);
      state.lastData = data;
      showPollError("");
      render();
    } catch (err) {
      showPollError(err && err.name === "AbortError" ? "timed out" : String((err && err.message) || err));
    } finally {
      clearTimeout(timer);
      setTimeout(poll, POLL_MS);
    }
  }

  // --- try it -------------------------------------------------------------------------

  function showTranscript(body, elapsed) {
    const segments = body.segments || [];
    const meta = [
      "language " + (body.language || "?"),
      "audio " + duration(body.duration),
      "answered in " + seconds(elapsed),
      segments.length + " segment" + (segments.length === 1 ? "" : "s"),
    ].join(" · ");
    $("try-result").replaceChildren(
      el("div", { class: "meta", text: meta }),
      el("p", { class: "full", text: body.text || "(no speech)" }),
      el(
        "ol",
        { class: "segments" },
        segments.map((s) =>
          el("li", { "data-start": String(s.start), "data-end": String(s.end) }, [
            el("span", { class: "ts", text: stamp(s.start) + " – " + stamp(s.end) }),
            el("span", { class: "seg-text", text: (s.text || "").trim() }),
          ])
        )
      )
    );
  }

  async function submit(event) {
    event.preventDefault();
    const file = $("try-file").files[0];
    const error = $("try-error");
    error.hidden = true;
    if (!file) {
      error.textContent = "choose an audio file first";
      error.hidden = false;
      return;
    }
    const form = new FormData();
    form.append("file", file, file.name);
    form.append("model", "whisper-1");
    form.append("response_format", "verbose_json");
    const language = $("try-language").value.trim();
    if (language) form.append("language", language);

    const button = $("try-submit");
    const status = $("try-status");
    button.disabled = true;
    status.textContent = "transcribing " + file.name + "…";
    $("try-result").replaceChildren();
    const started = performance.now();
    try {
      const response = await fetch("/v1/audio/transcriptions", {
        method: "POST",
        body: form,
        headers: authHeaders(),
      });
      if (!response.ok) throw new Error(await apiError(response));
      showTranscript(await response.json(), (performance.now() - started) / 1000);
      status.textContent = "";
    } catch (err) {
      error.textContent = String((err && err.message) || err);
      error.hidden = false;
      status.textContent = "";
    } finally {
      button.disabled = false;
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("try-form").addEventListener("submit", submit);
    window.addEventListener("resize", render);
    renderJobs([]);
    poll();
  });
})();
