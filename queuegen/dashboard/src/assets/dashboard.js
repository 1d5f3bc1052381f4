// queuegen dashboard: refreshes the overview's tables and draws the charts.
// Everything else is server-rendered HTML; without JS the pages still work.
"use strict";

(function () {
  // The overview's tables, fetched again as HTML every few seconds.
  const overview = document.getElementById("overview");
  if (overview) {
    const every = Number(overview.dataset.everyMs) || 5000;
    setInterval(async () => {
      try {
        const response = await fetch(overview.dataset.refresh, { credentials: "same-origin" });
        if (response.ok) overview.innerHTML = await response.text();
      } catch (err) {
        // A blip: the next refresh tries again; the page keeps the last numbers.
      }
    }, every);
  }

  const charts = document.getElementById("charts");
  if (!charts || typeof uPlot === "undefined") return;
  const select = document.getElementById("chart-queue");
  const width = () => Math.max(320, Math.floor((charts.clientWidth - 48) / 3));
  const colours = ["#2b6cb0", "#2f855a", "#c53030", "#b7791f"];
  const spec = [
    { id: "chart-throughput", series: [["delivered", "delivered"], ["acknowledged", "acknowledged"], ["dead_lettered", "dead-lettered"]] },
    { id: "chart-backlog", series: [["undelivered", "undelivered"], ["pending", "pending"], ["retries", "retries"], ["dead_letters", "dead letters"]] },
    { id: "chart-ages", series: [["oldest_ready_s", "oldest ready"], ["oldest_pending_s", "oldest pending"]] },
  ];
  const plots = new Map();

  function draw(data) {
    for (const chart of spec) {
      const columns = [data.t, ...chart.series.map(([key]) => data[key])];
      let plot = plots.get(chart.id);
      if (!plot) {
        const options = {
          width: width(),
          height: 200,
          series: [{}, ...chart.series.map(([, label], i) => ({ label, stroke: colours[i], width: 1.5, spanGaps: false }))],
          axes: [{}, { size: 60 }],
        };
        plot = new uPlot(options, columns, document.getElementById(chart.id));
        plots.set(chart.id, plot);
      } else {
        plot.setData(columns);
      }
    }
  }

  async function refresh() {
    const queue = select.value;
    const url = charts.dataset.series + (queue ? "?queue=" + encodeURIComponent(queue) : "");
    try {
      const response = await fetch(url, { credentials: "same-origin" });
      if (response.ok) draw(await response.json());
    } catch (err) {
      // Try again at the next sample.
    }
  }

  select.addEventListener("change", refresh);
  window.addEventListener("resize", () => plots.forEach((plot) => plot.setSize({ width: width(), height: 200 })));
  refresh();
  setInterval(refresh, Math.max(1000, Number(charts.dataset.everyMs) || 10000));
})();
