// draw.js — the console's charts, drawn by hand on canvases: a heat map of a
// matrix, line charts over time and small bar charts for small multiples.

// A colour for v in [-1, 1]: blue below zero, white at zero, red above.
function diverging(v) {
  const t = Math.max(-1, Math.min(1, v));
  const a = Math.round(255 * (1 - Math.abs(t)));
  return t < 0 ? [a, a, 255] : [255, a, a];
}

// The matrix data (rows x cols, row-major) as a heat map on canvas: one cell
// per value, the colour scale symmetric around zero up to the largest |value|.
// Returns that largest |value|.
export function heatmap(canvas, data, rows, cols, cell = Math.max(2, Math.floor(960 / cols))) {
  let max = 0;
  for (const v of data) max = Math.max(max, Math.abs(v));
  const img = new ImageData(cols, rows);
  for (let i = 0; i < rows * cols; i++) {
    const [r, g, b] = diverging(max ? data[i] / max : 0);
    img.data.set([r, g, b, 255], 4 * i);
  }
  const src = document.createElement('canvas');
  src.width = cols;
  src.height = rows;
  src.getContext('2d').putImageData(img, 0, 0);
  const cellH = Math.max(cell, Math.floor(160 / rows));
  canvas.width = cols * cell;
  canvas.height = rows * cellH;
  const ctx = canvas.getContext('2d');
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(src, 0, 0, canvas.width, canvas.height);
  return max;
}

const fmt = (v) => (Math.abs(v) >= 100 || v === 0 ? v.toFixed(0) : v.toPrecision(3));

// Line chart: series [{label, color, points: [[x, y], ...]}] with shared axes;
// y from opts.ymin/ymax or the data; points with y null are gaps.
export function lineChart(canvas, series, opts = {}) {
  const W = (canvas.width = opts.width || 520), H = (canvas.height = opts.height || 200);
  const ctx = canvas.getContext('2d');
  const pad = { l: 48, r: 12, t: 22, b: 24 };
  const pts = series.flatMap((s) => s.points.filter((p) => p[1] !== null));
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillStyle = '#6b7280';
  if (!pts.length) {
    ctx.fillText(opts.empty || 'no data yet', pad.l, H / 2);
    return;
  }
  let [x0, x1] = [Math.min(...pts.map((p) => p[0])), Math.max(...pts.map((p) => p[0]))];
  let y0 = opts.ymin ?? Math.min(...pts.map((p) => p[1]));
  let y1 = opts.ymax ?? Math.max(...pts.map((p) => p[1]));
  if (x0 === x1) [x0, x1] = [x0 - 1, x1 + 1];
  if (y0 === y1) y1 = y0 + (Math.abs(y0) || 1);
  const X = (x) => pad.l + ((x - x0) / (x1 - x0)) * (W - pad.l - pad.r);
  const Y = (y) => H - pad.b - ((y - y0) / (y1 - y0)) * (H - pad.t - pad.b);
  ctx.strokeStyle = '#d9dde5';
  ctx.beginPath();
  for (const y of [y0, (y0 + y1) / 2, y1]) {
    ctx.moveTo(pad.l, Y(y));
    ctx.lineTo(W - pad.r, Y(y));
    ctx.fillText(fmt(y), 4, Y(y) + 4);
  }
  ctx.stroke();
  ctx.fillText(opts.xFormat ? opts.xFormat(x0) : fmt(x0), pad.l, H - 6);
  const right = opts.xFormat ? opts.xFormat(x1) : fmt(x1);
  ctx.fillText(right, W - pad.r - ctx.measureText(right).width, H - 6);
  let lx = pad.l;
  for (const s of series) {
    ctx.strokeStyle = ctx.fillStyle = s.color;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    let pen = false;
    for (const [x, y] of s.points) {
      if (y === null) {
        pen = false;
        continue;
      }
      pen ? ctx.lineTo(X(x), Y(y)) : ctx.moveTo(X(x), Y(y));
      pen = true;
    }
    ctx.stroke();
    for (const [x, y, mark] of s.points) {
      if (y === null) continue;
      const r = mark ? 3 : 1.5; // marked points (e.g. rejected candidates) as squares
      ctx.fillRect(X(x) - r, Y(y) - r, 2 * r, 2 * r);
    }
    ctx.fillText(s.label, lx, 12);
    lx += ctx.measureText(s.label).width + 16;
  }
}

// A small bar chart of values on a shared scale [0, max]: one panel of a small
// multiple.
export function bars(canvas, values, max, { width = 120, height = 48, color = '#2457c5' } = {}) {
  canvas.width = width;
  canvas.height = height;
  const ctx = canvas.getContext('2d');
  ctx.fillStyle = '#f6f7f9';
  ctx.fillRect(0, 0, width, height);
  ctx.fillStyle = color;
  const w = width / values.length;
  values.forEach((v, i) => {
    const bh = max > 0 ? (v / max) * (height - 2) : 0;
    ctx.fillRect(i * w, height - bh, Math.max(1, w - 1), bh);
  });
}
