# ruff: noqa: E501  (HTML template lines)
"""The Jinja2 template of ``report.html`` (autoescaped; rendered by :mod:`vqadiag.report.html`)."""

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vqadiag report: {{ report.models | map(attribute='label') | join(', ') }}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1rem auto;
       max-width: 1200px; padding: 0 1rem; color: #1d1d1f; background: #fff; }
img.thumb { display: block; max-width: 160px; border: 1px solid #ccc; }
h1 { font-size: 1.5rem; margin: 0 0 .2rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .85rem; }
th, td { border: 1px solid #ddd; padding: .25rem .45rem; vertical-align: top; }
th { background: #f4f4f6; text-align: left; }
td.num { text-align: right; white-space: nowrap; }
.ci { color: #666; font-size: .78rem; } .n { color: #999; font-size: .72rem; }
.ref { background: #f7f7ff; } .sig { background: #eef6ff; }
.sig-higher { background: #e3ecfb; } .sig-lower { background: #fbeedd; }
.mark { font-weight: bold; } .notrun { color: #999; font-style: italic; }
.fail { color: #b3261e; } .ok { color: #1e7b34; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .85rem; color: #444; }
code { background: #f4f4f6; padding: 0 .2rem; }
h2 { font-size: 1.2rem; margin: .8rem 0 .4rem; } p.lead { margin: .2rem 0; font-size: .85rem; color: #444; }
.findings { display: grid; grid-template-columns: repeat(auto-fill, minmax(370px, 1fr)); gap: .3rem 1rem; }
.model-findings h3 { font-size: .95rem; margin: .2rem 0 0; }
.model-findings ul { margin: .1rem 0 .3rem; padding-left: 1.1rem; font-size: .8rem; line-height: 1.3; }
.verdict { font-weight: 600; } .verdict::after { content: ":"; } .tone-good .verdict { color: #1e6b34; }
.tone-bad .verdict { color: #a1261b; } .tone-neutral .verdict { color: #7a5a00; }
.quiet { color: #666; font-size: .8rem; }
.raw { color: #555; font-size: .8rem; font-style: italic; overflow-wrap: anywhere; }
table.overview { font-size: .72rem; width: 100%; margin: 0; }
table.overview th { font-weight: 600; vertical-align: bottom; }
table.overview td { text-align: center; padding: .3rem .2rem; }
table.overview a { color: inherit; text-decoration: none; }
details > summary { cursor: pointer; font-weight: 600; margin: .4rem 0; }
</style>
</head>
<body>
<h1>vqadiag report</h1>
<p class="lead">{{ report.models | length }} model(s); report schema {{ report.kind }} v{{ report.schema_version }},
vqadiag {{ report.vqadiag_version }}, seed {{ report.seed }}, {{ report.n_bootstrap }} bootstrap
resamples. Every figure is a value with its 95% bootstrap interval and its number of units n.</p>

<section id="findings">
<h2>Findings</h2>
{% set F = report.findings %}
<div class="findings">
{% for m in F.models %}{% set mi = loop.index0 %}
<div class="model-findings"><h3>{{ m.model }}{% if m.blind %} <span class="quiet">reads no image: a baseline</span>{% endif %}</h3>
<ul>
{% for f in m['items'] %}<li id="finding-{{ mi }}-{{ loop.index0 }}" class="tone-{{ f.tone }}"><span class="verdict">{{ f.verdict }}</span> {{ f.sentence }} <span class="quiet">Holm {{ p_text(f.p_adjusted) }}{% if f.evidence %} · <a href="#{{ f.evidence }}">evidence</a>{% endif %}</span></li>
{% else %}<li class="quiet">no verdict: no rule's evidence is significant.</li>{% endfor %}
</ul></div>
{% endfor %}
</div>
{% for note in F.notes %}<p class="notrun">{{ note }}</p>{% endfor %}
<p class="quiet">Verdicts come from rules declared with each suite's figures (docs/report.md, "Findings");
the {{ F.tests }} tests behind them are corrected together with Holm's method (family-wise α = {{ F.alpha }}),
and a rule whose evidence is missing or not significant says nothing.{% if F.baseline %} Blind baseline: <b>{{ F.baseline }}</b>.{% endif %}</p>
</section>

<section id="overview">
<h2>Every model at a glance</h2>
<figure style="margin: .3rem 0 1rem">
<table class="overview">
<tr><th>model</th>{% for c in report.overview.columns %}<th title="{{ c.label }}{% if c.direction != 'neither' %} ({{ c.direction }} is better){% endif %}">{{ c.label }}{% if c.unit != '%' %} ({{ c.unit }}){% endif %}{% if c.direction == 'lower' %} ↓{% endif %}</th>{% endfor %}</tr>
{% for row in report.overview.rows %}
<tr><th>{{ row.model }}{% if row.reference %} (ref){% endif %}</th>
{% for cell in row.cells %}{% if cell.value is none %}<td class="notrun">–</td>{% else %}<td style="{{ shade(cell.goodness) }}">{% if cell.anchor %}<a href="#{{ cell.anchor }}">{{ cell.text }}</a>{% else %}{{ cell.text }}{% endif %}</td>{% endif %}{% endfor %}</tr>
{% endfor %}
</table>
<figcaption>Each column is shaded within its own range across the models: darker is better
(↓: lower is better). Values as on the report card; click a value for its interval and test.</figcaption>
</figure>
</section>

<section id="plots">
<h2>Plots</h2>
{% for name, plot in report.plots.items() %}
<figure id="plot-{{ name }}">
<h3>{{ plot.title }}</h3>
{% if images[name] %}<img class="plot" alt="{{ plot.title }}" src="data:image/png;base64,{{ images[name] }}">
{% else %}<p class="notrun">not run for any model.</p>{% endif %}
<figcaption>{% for model, why in plot.not_run.items() %}<span class="notrun">{{ model }}: not run: {{ why }}</span><br>{% endfor %}</figcaption>
</figure>
{% endfor %}
</section>

<section id="card">
<h2>Report card</h2>
<p>Cells: value [95% CI] and n. Marked against the reference model
<b>{{ report.card.reference }}</b> with a paired test on the same units
(p &lt; {{ report.card.alpha }}): <span class="mark">▲</span> significantly higher,
<span class="mark">▼</span> significantly lower, no mark: not significant,
<span class="mark">†</span> not paired (different data). Hover a cell for the test and p-value.</p>
<table>
<tr><th>figure</th>{% for row in report.card.rows %}<th{% if row.reference %} class="ref"{% endif %}>{{ row.model }}{% if row.reference %} (ref){% endif %}</th>{% endfor %}</tr>
{% for c in report.card.columns %}
<tr><th>{{ c.label }}{% if c.unit != '%' %} ({{ c.unit }}){% endif %}</th>
{% for row in report.card.rows %}{% set cell = row.cells[c.key] %}{% set vs = cell.vs_reference %}
{% if cell.estimate is none %}<td id="{{ cell.anchor }}" class="notrun">{% if cell.not_run %}not run: {{ cell.not_run }}{% else %}-{% endif %}</td>
{% else %}<td id="{{ cell.anchor }}" class="num{% if vs and vs.direction %} sig-{{ vs.direction }}{% endif %}"{% if vs %} title="{{ vs_title(vs) }}"{% endif %}>
{{ fmt(cell.estimate.value, c.key) }}{% if vs %}{% if not vs.paired %} <span class="mark">†</span>{% elif vs.direction == 'higher' %} <span class="mark">▲</span>{% elif vs.direction == 'lower' %} <span class="mark">▼</span>{% endif %}{% endif %}
<span class="ci">[{{ fmt(cell.estimate.ci_low, c.key) }}, {{ fmt(cell.estimate.ci_high, c.key) }}]</span>
<span class="n">n={{ cell.estimate.n }}</span></td>{% endif %}
{% endfor %}</tr>
{% endfor %}
</table>
</section>

<section id="comparisons">
<h2>Pairwise comparisons</h2>
<p>Difference a − b with its 95% paired-bootstrap interval; test: McNemar's exact test for
0/1 outcomes on the same units, paired bootstrap otherwise. p-values here are not adjusted
for multiple comparisons (the findings' are).</p>
{% if report.comparisons %}
{% set ref = report.card.reference %}
{% for group in (['against the reference ' ~ ref, true], ['other pairs', false]) %}
<details id="comparisons-{{ 'reference' if group[1] else 'others' }}"{% if group[1] %} open{% endif %}>
<summary>{{ group[0] }}</summary>
<table>
<tr><th>a</th><th>b</th><th>figure</th><th>a − b</th><th>95% CI</th><th>n</th><th>test</th><th>p</th></tr>
{% for c in report.comparisons if (c.a == ref or c.b == ref) == group[1] %}
<tr id="{{ c.anchor }}"{% if c.significant %} class="sig"{% endif %}><td>{{ c.a }}</td><td>{{ c.b }}</td><td>{{ c.metric }}</td>
{% if c.paired %}<td class="num">{{ fmt(c.difference.value, c.metric) }}</td>
<td class="num">[{{ fmt(c.difference.ci_low, c.metric) }}, {{ fmt(c.difference.ci_high, c.metric) }}]</td>
<td class="num">{{ c.difference.n }}</td><td>{{ c.test }}</td><td class="num">{{ pfmt(c.p_value, report.n_bootstrap) }}{% if c.significant %} *{% endif %}</td>
{% else %}<td colspan="5" class="notrun">{{ c.reason }}</td>{% endif %}</tr>
{% else %}<tr><td colspan="8" class="notrun">none</td></tr>
{% endfor %}
</table>
</details>
{% endfor %}
{% else %}<p class="notrun">one model only: nothing to compare.</p>{% endif %}
</section>

<section id="drilldown">
<h2>Example failures</h2>
{% if not report.drilldown %}<p class="notrun">no per-question rows.</p>{% endif %}
{% for suite, table in report.drilldown.items() %}
<div id="drill-{{ suite }}">
<h3>{{ table.title }} <span class="n">({{ table.rows | length }} of {{ table.n_failing }} units where some model fails)</span></h3>
{% set supported = [] %}{% for m in report.findings.models %}{% set mi = loop.index0 %}{% for f in m['items'] %}{% if f.suite == suite %}{% set _ = supported.append((m.model, f.verdict, 'finding-' ~ mi ~ '-' ~ loop.index0)) %}{% endif %}{% endfor %}{% endfor %}
{% if supported %}<p class="quiet">Evidence for: {% for model, verdict, anchor in supported %}<a href="#{{ anchor }}">{{ model }}: {{ verdict }}</a>{% if not loop.last %}; {% endif %}{% endfor %}</p>{% endif %}
<table>
<tr><th>unit</th><th>question</th><th>image</th><th>ground truth</th>{% for m in report.models %}<th>{{ m.label }}</th>{% endfor %}</tr>
{% for r in table.rows %}
<tr><td><code>{{ r.id }}</code></td><td>{{ r.question or '' }}</td><td>{% set thumb = thumbnails.get(suite ~ '|' ~ r.id) %}{% if thumb %}<img class="thumb" alt="image {{ r.image_id }}{% if r.relevant is defined %}: relevant boxes green, irrelevant red{% endif %}" src="data:image/jpeg;base64,{{ thumb }}"><br>{% endif %}<code>{{ r.image_id or '' }}</code></td><td>{{ r.truth or '' }}</td>
{% for m in r.models %}<td class="{% if m.failed %}fail{% elif m.failed is sameas false %}ok{% endif %}">
{% if m.answers is none %}<span class="notrun">-</span>{% else %}{% for cond, ans in m.answers.items() %}{{ cond }}: <b>{{ ans if ans is not none else '-' }}</b>{% if m.raw and cond in m.raw %} <span class="raw" title="generated text">“{{ m.raw[cond] }}”</span>{% endif %}<br>{% endfor %}{% endif %}</td>{% endfor %}
</tr>
{% endfor %}
</table>
</div>
{% endfor %}
</section>

<section id="models">
<h2>Models</h2>
<table>
<tr><th>model</th><th>result folder</th><th>model fingerprint</th><th>data fingerprint</th>
<th>suites run</th><th>not run</th></tr>
{% for m in report.models %}
<tr{% if m.label == report.card.reference %} class="ref"{% endif %}>
<td>{{ m.label }}{% if m.label == report.card.reference %} (reference){% endif %}</td>
<td><code>{{ m.result_dir }}</code></td><td><code>{{ m.fingerprint or '-' }}</code></td>
<td><code>{{ m.data_fingerprint or '-' }}</code></td><td>{{ m.suites | join(', ') }}</td>
<td>{% for s, why in m.skipped.items() %}<span class="notrun">{{ s }}: not run: {{ why }}</span><br>{% endfor %}</td>
</tr>
{% endfor %}
</table>
</section>

<section id="about">
<h2>About</h2>
<p>Written by <code>vqadiag report</code> from the result folders of <code>vqadiag diagnose</code>
(docs/results-schema.md). The same inputs and seed give the same report apart from
the creation time ({{ report.created }}). Formulas: docs/protocols.md; the report schema: docs/report.md.</p>
</section>
</body>
</html>
"""
