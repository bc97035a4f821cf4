// What a reader would call a broken chart, found in the rendered SVG of every Vega chart
// (div.tempo-chart) on the page.  Returns a list of problems, one string each:
//  - no marks: not one mark item (bar, point, line, rule, area) with a visible size;
//  - clipped axis: a mark item outside its plotting area (its cell's background rectangle);
//  - wider than the page: the chart runs past the right edge of the box that shows it;
//  - a facet drawing another facet's data: a mark item whose datum disagrees with its cell's
//    facet key.
(() => {
  const TOL = 2;   // px: half a stroke, and rounding
  const problems = [];
  const inAxis = el => el.closest('[class*="role-axis"], [class*="role-legend"], [class*="role-title"], [class*="header"]');
  const charts = Array.from(document.querySelectorAll("div.tempo-chart"));
  charts.forEach((div, k) => {
    const name = `chart ${k + 1} of ${charts.length}`;
    const svg = div.querySelector("svg");
    if (!svg) { problems.push(`${name}: no SVG`); return; }
    const title = (svg.querySelector('[class*="role-title"] text') || {}).textContent || "";
    const label = `${name}${title ? ` ("${title}")` : ""}`;
    // the box that shows the chart: the nearest ancestor that clips or scrolls
    let box = div.parentElement;
    while (box && box !== document.body) {
      const ov = getComputedStyle(box).overflowX;
      if (ov !== "visible") break;
      box = box.parentElement;
    }
    const sr = svg.getBoundingClientRect();
    if (box) {
      const br = box.getBoundingClientRect();
      if (sr.right > br.right + TOL) problems.push(`${label}: ${Math.round(sr.width)} px wide, wider than the page (${Math.round(br.right - sr.left)} px shown)`);
    }
    let visible = 0;
    const groups = Array.from(svg.querySelectorAll('g[class*="role-mark"]')).filter(g => !inAxis(g));
    groups.forEach(g => {
      const type = (g.getAttribute("class").match(/mark-(\w+)/) || [])[1];
      if (type === "text" || type === "group") return;
      // the group item (a view, or one cell of a facet or concat) the marks are drawn in
      let cell = g.parentElement;
      while (cell && !(cell.parentElement && cell.parentElement.matches('g.mark-group'))) cell = cell.parentElement;
      const bg = cell && cell.querySelector(":scope > path.background");
      const area = bg ? bg.getBoundingClientRect() : null;
      const cellItem = cell && cell.__data__;
      const inFacet = cell && cell.parentElement.matches('g[class*="role-scope"]');
      const key = inFacet && cellItem && cellItem.datum && typeof cellItem.datum === "object" ? cellItem.datum : null;
      let outside = 0, foreign = 0;
      Array.from(g.children).forEach(el => {
        const r = el.getBoundingClientRect();
        const shown = type === "rect" ? (r.width >= 0.5 && r.height >= 0.5) : (r.width >= 0.5 || r.height >= 0.5);
        if (shown) visible++;
        if (area && area.width > 0 && area.height > 0 && shown) {
          const cx = (r.left + r.right) / 2, cy = (r.top + r.bottom) / 2;
          const out = type === "symbol"
            ? (cx < area.left - TOL || cx > area.right + TOL || cy < area.top - TOL || cy > area.bottom + TOL)
            : (r.left < area.left - TOL || r.right > area.right + TOL || r.top < area.top - TOL || r.bottom > area.bottom + TOL);
          if (out) outside++;
        }
        // a line or an area is one path for many items: check each of them
        const item = el.__data__;
        const items = item ? ((type === "line" || type === "area") && item.mark ? item.mark.items : [item]) : [];
        if (key && items.some(it => it && it.datum && typeof it.datum === "object" &&
            Object.keys(key).some(f => !f.startsWith("_") && f !== "count" && f in it.datum && String(it.datum[f]) !== String(key[f])))) foreign++;
      });
      if (outside) problems.push(`${label}: ${outside} ${type} mark(s) outside the plotting area (a clipped axis)`);
      if (foreign) problems.push(`${label}: a facet draws ${foreign} ${type} mark(s) of another facet's data`);
    });
    if (!visible) problems.push(`${label}: no marks (every mark has zero size)`);
  });
  return problems;
})()
