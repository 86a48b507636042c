/* report.js - the interactive parts of index.html, written by `attnlab
 * report` (which embeds this file in the page; see docs/report-page.md):
 * every table sortable by any column, the trade-off plot with a choice of
 * cost axis, error bars, the Pareto front and a tooltip, and the
 * validation curves toggled per configuration. It draws from the JSON in
 * <script id="al-data"> only: nothing is fetched. Text from the data goes
 * into the page as text nodes and attribute values, never as markup. */
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg';
  var D = JSON.parse(document.getElementById('al-data').textContent);
  var COLORS = ['#1f5fa8', '#c03030', '#2a8a3a', '#8a4fb0', '#d07a10', '#138a8a',
                '#a8326e', '#5c6b12', '#6b4a2a', '#555555'];

  /* ---------------------------------------------------------- helpers */

  function svg(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function html(tag, attrs, text, parent) {
    var e = document.createElement(tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function finite(v) { return typeof v === 'number' && isFinite(v); }

  /* 1,234,567 */
  function grouped(v) {
    return Math.round(v).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }

  /* 1.2k, 3.4M, 5G: axis ticks and large figures. */
  function si(v) {
    var units = ['', 'k', 'M', 'G', 'T', 'P', 'E'], a = Math.abs(v), i = 0;
    while (a >= 1000 && i < units.length - 1) { a /= 1000; v /= 1000; i++; }
    var s = Math.abs(v) >= 100 || v === Math.round(v) ? v.toFixed(0) : v.toPrecision(3);
    if (s.indexOf('.') >= 0) s = s.replace(/0+$/, '').replace(/\.$/, '');
    return s + units[i];
  }

  function figure(v, cost) {
    if (!finite(v)) return '–';
    if (cost && cost.unit === 'bytes' && Math.abs(v) < 1e9) return grouped(v);
    return Math.abs(v) >= 1e4 ? si(v) : String(+v.toPrecision(5));
  }

  /* ---------------------------------------------------------- sorting */

  /* A cell's sort key: its data-v, else the number it begins with. */
  function cellKey(td) {
    var v = td.getAttribute('data-v');
    if (v !== null) return parseFloat(v);
    var m = /^\(?([+\-\u2212]?\d[\d,]*(\.\d+)?([eE][+\-]?\d+)?)/.exec(td.textContent.trim());
    return m ? parseFloat(m[1].replace(/,/g, '').replace('\u2212', '-')) : NaN;
  }

  /* Numbers first (by value), then text; a second click reverses. */
  function sortBy(table, col, th) {
    var dir = th.getAttribute('aria-sort') === 'ascending' ? -1 : 1;
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    var keyed = rows.map(function (r, i) {
      var td = r.cells[col];
      return {r: r, i: i, v: td ? cellKey(td) : NaN, t: td ? td.textContent.trim() : ''};
    });
    keyed.sort(function (a, b) {
      var an = !isNaN(a.v), bn = !isNaN(b.v);
      if (an && bn && a.v !== b.v) return dir * (a.v - b.v);
      if (an !== bn) return an ? -1 : 1;
      if (!an && a.t !== b.t) return dir * a.t.localeCompare(b.t);
      return a.i - b.i;
    });
    keyed.forEach(function (k) { body.appendChild(k.r); });
    Array.prototype.forEach.call(th.parentNode.cells, function (c) {
      c.removeAttribute('aria-sort');
    });
    th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending');
  }

  function makeSortable(table) {
    if (!table.tHead || !table.tBodies.length) return;
    table.classList.add('al-sortable');
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.tabIndex = 0;
      th.title = 'sort by this column (again: reverse)';
      th.addEventListener('click', function () { sortBy(table, col, th); });
      th.addEventListener('keydown', function (e) {
        if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sortBy(table, col, th); }
      });
    });
  }

  /* ---------------------------------------------------------- scales */

  /* A linear or log scale from [lo, hi] onto [a, b], with its ticks. */
  function scale(lo, hi, a, b, log) {
    if (log) {
      var base = hi / lo > 1e4 ? 10 : 2, L = Math.log(base);
      var l0 = Math.log(lo) / L, l1 = Math.log(hi) / L;
      if (l1 - l0 < 1e-9) { l0 -= 0.5; l1 += 0.5; }
      var pad = (l1 - l0) * 0.08; l0 -= pad; l1 += pad;
      var f = function (v) { return a + (Math.log(v) / L - l0) / (l1 - l0) * (b - a); };
      var ticks = [];
      var step = Math.max(1, Math.ceil((l1 - l0) / 8));
      for (var e = Math.ceil(l0); e <= l1; e += step) ticks.push(Math.pow(base, e));
      f.ticks = ticks;
      return f;
    }
    if (hi - lo < 1e-12) { lo -= Math.abs(lo) * 0.05 + 1e-3; hi += Math.abs(hi) * 0.05 + 1e-3; }
    var p = (hi - lo) * 0.08; lo -= p; hi += p;
    var g = function (v) { return a + (v - lo) / (hi - lo) * (b - a); };
    var raw = (hi - lo) / 6, mag = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10));
    var st = [1, 2, 5, 10].map(function (m) { return m * mag; }).filter(function (s) {
      return s >= raw;
    })[0];
    g.ticks = [];
    for (var t = Math.ceil(lo / st) * st; t <= hi + st * 1e-9; t += st) g.ticks.push(+t.toPrecision(12));
    return g;
  }

  function axes(g, x, y, box, xlabel, ylabel, xfmt) {
    var ax = svg('g', {'class': 'al-axis'}, g), grid = svg('g', {'class': 'al-grid'}, g);
    x.ticks.forEach(function (t) {
      var px = x(t);
      svg('line', {x1: px, x2: px, y1: box.t, y2: box.b}, grid);
      svg('text', {x: px, y: box.b + 16, 'text-anchor': 'middle'}, ax).textContent = xfmt(t);
    });
    y.ticks.forEach(function (t) {
      var py = y(t);
      svg('line', {x1: box.l, x2: box.r, y1: py, y2: py}, grid);
      svg('text', {x: box.l - 6, y: py + 4, 'text-anchor': 'end'}, ax).textContent =
        String(+t.toPrecision(6));
    });
    svg('path', {d: 'M' + box.l + ',' + box.t + 'V' + box.b + 'H' + box.r, fill: 'none'}, ax);
    svg('text', {x: (box.l + box.r) / 2, y: box.b + 36, 'text-anchor': 'middle'}, ax)
      .textContent = xlabel;
    svg('text', {x: 14, y: (box.t + box.b) / 2, 'text-anchor': 'middle',
                 transform: 'rotate(-90 14 ' + (box.t + box.b) / 2 + ')'}, ax)
      .textContent = ylabel;
  }

  /* ---------------------------------------------------------- trade-off */

  var tip = document.getElementById('al-tip');

  /* blocks: one list of lines per configuration, its name first (bold). */
  function showTip(ev, blocks) {
    tip.textContent = '';
    blocks.forEach(function (lines) {
      var div = html('div', {'class': 'al-tip-block'}, null, tip);
      html('b', {}, lines[0], div);
      lines.slice(1).forEach(function (l) { html('div', {}, l, div); });
    });
    tip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + tip.offsetWidth > window.innerWidth) x = ev.clientX - tip.offsetWidth - 14;
    if (y + tip.offsetHeight > window.innerHeight) y = ev.clientY - tip.offsetHeight - 14;
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }

  function hideTip() { tip.hidden = true; }

  /* The points no other point dominates: a cost no worse (lower, or
   * higher when higher is better) and a quality no worse, one of the two
   * strictly better. */
  function paretoFront(pts, higherCost, maximize) {
    function better(a, b, hi) { return hi ? a > b : a < b; }
    return pts.filter(function (p) {
      return !pts.some(function (o) {
        if (o === p) return false;
        var cNoWorse = o.x === p.x || better(o.x, p.x, higherCost);
        var qNoWorse = o.y === p.y || better(o.y, p.y, maximize);
        return cNoWorse && qNoWorse && (o.x !== p.x || o.y !== p.y);
      });
    });
  }

  function tipLines(c, cost, x) {
    var l = [c.name + (c.base ? ' (baseline)' : ''),
             cost.label + ': ' + figure(x, cost),
             D.metric + ': ' + c.q.toFixed(4) + (c.n > 1 ? ' ± ' + c.ci.toFixed(4) : '') +
             ' (' + c.n + (c.n === 1 ? ' seed)' : ' seeds)')];
    if (!c.base && finite(c.delta))
      l.push('Δ vs ' + (c.vs || 'baseline') + ': ' + (c.delta >= 0 ? '+' : '') +
             c.delta.toFixed(4) +
             (finite(c.delta_lo) ? ' [' + c.delta_lo.toFixed(4) + ', ' + c.delta_hi.toFixed(4) +
              ']' : '') + (c.resolved ? ', resolved' : ', not resolved'));
    l.push(c.variant ? 'variant: ' + c.variant : '');
    return l.filter(Boolean);
  }

  /* Labels beside their points, each moved down or up until it clears the
   * ones placed before (coincident points would print over each other). */
  function placeLabel(g, placed, px, py, text, right) {
    var w = text.length * 6.2 + 4, h = 13, offs = [0, 13, -13, 26, -26, 39, -39, 52, -52];
    var left = px + 8 + w > right;   /* no room on the right: the label goes left */
    var x0 = left ? px - 8 - w : px + 8;
    for (var i = 0; i < offs.length; i++) {
      var y = py - 8 + offs[i];
      var hit = placed.some(function (b) {
        return x0 < b.x + b.w && b.x < x0 + w && y - h < b.y && b.y - h < y;
      });
      if (!hit || i === offs.length - 1) {
        placed.push({x: x0, y: y, w: w});
        svg('text', {x: left ? px - 8 : px + 8, y: y, 'class': 'al-label',
                     'text-anchor': left ? 'end' : 'start'}, g).textContent = text;
        return;
      }
    }
  }

  function drawTradeoff() {
    var box = document.getElementById('al-tradeoff');
    if (!box) return;
    var cost = D.costs.filter(function (c) { return c.key === D.state.cost; })[0];
    var pts = [];
    D.configs.forEach(function (c, i) {
      var x = c.cost[cost.key];
      if (c.drawable && finite(c.q) && finite(x)) pts.push({c: c, i: i, x: x, y: c.q});
    });
    box.textContent = '';
    var W = 1080, H = 480, m = {l: 70, r: 40, t: 20, b: 56};
    var s = svg('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
                        role: 'img', 'aria-label': D.metric + ' against ' + cost.label}, box);
    var note = document.getElementById('al-tradeoff-note');
    if (!pts.length) {
      svg('text', {x: W / 2, y: H / 2, 'text-anchor': 'middle'}, s).textContent =
        'No configuration has both a ' + D.metric + ' and this cost.';
      note.textContent = '';
      return;
    }
    var xs = pts.map(function (p) { return p.x; });
    var lo = Math.min.apply(null, pts.map(function (p) { return p.y - (p.c.ci || 0); }));
    var hi = Math.max.apply(null, pts.map(function (p) { return p.y + (p.c.ci || 0); }));
    var xmin = Math.min.apply(null, xs), xmax = Math.max.apply(null, xs);
    var log = xmin > 0 && xmax / xmin >= 4;
    var b = {l: m.l, r: W - m.r, t: m.t, b: H - m.b};
    var x = scale(xmin, xmax, b.l, b.r, log), y = scale(lo, hi, b.b, b.t, false);
    axes(s, x, y, b, cost.label + (log ? ' (log scale)' : ''), D.metric, function (t) {
      return cost.unit === 'bytes' && t < 1e4 ? grouped(t) : si(t);
    });
    var front = paretoFront(pts, cost.higher, D.maximize);
    var names = front.map(function (p) { return p.c.name; }).sort().join('\n');
    var same = names === D.configs.filter(function (c) { return c.front; })
      .map(function (c) { return c.name; }).sort().join('\n');
    front.sort(function (a, b2) { return a.x - b2.x; });
    var d = '';
    front.forEach(function (p, k) {
      d += k ? 'H' + x(p.x) + 'V' + y(p.y) : 'M' + x(p.x) + ',' + y(p.y);
    });
    svg('path', {'class': 'al-front', d: d}, s);
    var placed = [];
    pts.forEach(function (p) {
      var px = x(p.x), py = y(p.y), col = COLORS[p.i % COLORS.length];
      if (p.c.n > 1 && finite(p.c.ci)) {
        var y0 = y(p.y - p.c.ci), y1 = y(p.y + p.c.ci);
        svg('path', {'class': 'al-err', stroke: col, d: 'M' + px + ',' + y0 + 'V' + y1 +
                     'M' + (px - 4) + ',' + y0 + 'h8M' + (px - 4) + ',' + y1 + 'h8'}, s);
      }
    });
    pts.forEach(function (p) { p.px = x(p.x); p.py = y(p.y); });
    pts.forEach(function (p) {
      var px = p.px, py = p.py, col = COLORS[p.i % COLORS.length];
      /* points drawn on top of each other: the tooltip names them all */
      var here = [p].concat(pts.filter(function (o) {
        return o !== p && Math.abs(o.px - px) < 6 && Math.abs(o.py - py) < 6;
      }));
      var hollow = same && !p.c.place_resolved;
      var dot = svg('circle', {'class': 'al-pt', cx: px, cy: py, r: 6, stroke: col,
                               'stroke-width': 2, fill: hollow ? '#fff' : col,
                               'data-name': p.c.name, tabindex: 0}, s);
      var show = function (ev) {
        dot.classList.add('al-hot');
        showTip(ev, here.map(function (o) { return tipLines(o.c, cost, o.x); }));
      };
      dot.addEventListener('mouseenter', show);
      dot.addEventListener('mousemove', show);
      dot.addEventListener('mouseleave', function () { dot.classList.remove('al-hot'); hideTip(); });
      dot.addEventListener('focus', function () {
        var r = dot.getBoundingClientRect();
        show({clientX: r.right, clientY: r.bottom});
      });
      dot.addEventListener('blur', hideTip);
      placeLabel(s, placed, px, py, p.c.name + (p.c.n === 1 ? ' (n=1)' : ''), W - 4);
    });
    note.textContent = 'Each point: a configuration, the mean over seeds with its 95 % ' +
      't-interval as error bars (none for one seed). Dashed: the Pareto front of the means ' +
      'against this cost (' + (cost.higher ? 'higher' : 'lower') + ' is cheaper). ' +
      (same ? 'A hollow point is not resolved from a front neighbour (report.md, ' +
              '"Pareto front"): its place could change with other seeds.'
            : 'On this axis the front differs from the one report.md resolves (KV bytes ' +
              'per token), so no point is marked resolved or not here.') +
      ' Point at a configuration for its figures.';
  }

  function costSelector() {
    var sel = document.getElementById('al-cost');
    if (!sel) return;
    D.costs.forEach(function (c) {
      html('option', {value: c.key}, c.label, sel);
    });
    sel.value = D.state.cost;
    sel.addEventListener('change', function () { D.state.cost = sel.value; drawTradeoff(); });
  }

  /* ---------------------------------------------------------- curves */

  function drawPanel(s, ox, W, H, key, label, ytop) {
    var b = {l: ox + 66, r: ox + W - 16, t: 16, b: H - 52};
    var xs = [], ys = [];
    D.configs.forEach(function (c) {
      if (!c.curve) return;
      c.curve[key].forEach(function (v, k) {
        if (finite(c.curve.val[k])) { xs.push(v); ys.push(c.curve.val[k]); }
      });
    });
    if (!xs.length) return;
    var yhi = finite(ytop) ? ytop : Math.max.apply(null, ys);
    var x = scale(Math.min.apply(null, xs), Math.max.apply(null, xs), b.l, b.r, false);
    var y = scale(Math.min.apply(null, ys), yhi, b.b, b.t, false);
    axes(s, x, y, b, label, 'validation loss (nats/token)', si);
    var clip = 'al-clip-' + key;
    svg('rect', {x: b.l, y: b.t, width: b.r - b.l, height: b.b - b.t},
        svg('clipPath', {id: clip}, s));
    D.configs.forEach(function (c, i) {
      if (!c.curve) return;
      var d = '', up = '', down = '', col = COLORS[i % COLORS.length];
      c.curve[key].forEach(function (v, k) {
        var w = c.curve.val[k], lo = c.curve.lo[k], hi = c.curve.hi[k];
        if (finite(w)) d += (d ? 'L' : 'M') + x(v).toFixed(1) + ',' + y(w).toFixed(1);
        if (finite(lo) && finite(hi)) {
          up += (up ? 'L' : 'M') + x(v).toFixed(1) + ',' + y(hi).toFixed(1);
          down = 'L' + x(v).toFixed(1) + ',' + y(lo).toFixed(1) + down;
        }
      });
      /* the seeds' spread: from the highest seed forward, the lowest back */
      var band = svg('path', {'class': 'al-band', d: up ? up + down + 'Z' : '', fill: col,
                              'clip-path': 'url(#' + clip + ')', 'data-name': c.name}, s);
      var p = svg('path', {'class': 'al-curve', d: d, stroke: col,
                           'clip-path': 'url(#' + clip + ')', 'data-name': c.name}, s);
      if (!D.state.shown[i]) p.style.display = band.style.display = 'none';
    });
  }

  function drawCurves() {
    var box = document.getElementById('al-curves');
    if (!box) return;
    box.textContent = '';
    if (!D.configs.some(function (c) { return c.curve; })) {
      box.textContent = 'No validation curves (no metrics.csv with val_loss).';
      return;
    }
    /* by tokens too only when the configurations train different tokens
       per step: else that panel is the one by step again */
    var two = D.curve_by_tokens, W = two ? 1100 : 760, H = 400;
    var s = svg('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img',
                        'data-panels': two ? 2 : 1,
                        'aria-label': two ? 'validation loss by step and by tokens'
                                          : 'validation loss by step'}, box);
    drawPanel(s, 0, two ? W / 2 : W, H, 'step', 'optimizer step', D.curve_ytop);
    if (two) drawPanel(s, W / 2, W / 2, H, 'tokens', 'tokens trained', D.curve_ytop);
  }

  function curveToggles() {
    var bar = document.getElementById('al-curve-toggles');
    if (!bar) return;
    D.configs.forEach(function (c, i) {
      D.state.shown[i] = true;
      if (!c.curve) return;
      var lab = html('label', {style: 'color:' + COLORS[i % COLORS.length]}, null, bar);
      var box = html('input', {type: 'checkbox', 'data-name': c.name}, null, lab);
      box.checked = true;
      lab.appendChild(document.createTextNode(' ' + c.name));
      box.addEventListener('change', function () {
        D.state.shown[i] = box.checked;
        drawCurves();
      });
    });
  }

  /* ---------------------------------------------------------- start */

  D.state = {cost: D.costs.length ? D.costs[0].key : null, shown: []};
  Array.prototype.forEach.call(document.querySelectorAll('table.al-md'), makeSortable);
  if (D.state.cost) { costSelector(); drawTradeoff(); }
  curveToggles();
  drawCurves();
  document.body.setAttribute('data-al-ready', '1');
})();
