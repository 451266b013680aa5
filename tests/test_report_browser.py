"""report.html in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``), driven by Selenium without Selenium Manager (no network)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vqadiag.report.plots import registered_plots
from vqadiag.workflows.report import report

FIX = Path(__file__).parent / "fixtures"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SECTIONS = ("findings", "overview", "plots", "card", "comparisons", "drilldown", "models", "about")
PLOTS = tuple(registered_plots())  # every figure (tests/test_report_card.py pins the list)


@pytest.fixture(scope="module")
def driver():
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip(
            "chromium / chromedriver not installed (apt-get install chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield drv
    finally:
        drv.quit()


def test_report_renders_in_chromium(driver, tmp_path):
    from matplotlib.image import imread

    out = tmp_path / "report"
    report([FIX / "results_a", FIX / "results_b", FIX / "results_c"], out, n_bootstrap=100)
    page = out / "report.html"
    driver.get(page.resolve().as_uri())
    driver.execute_script("return document.readyState")  # waits for the load
    severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert severe == []
    for section in SECTIONS:
        assert driver.find_elements("id", section), f"section #{section} missing"
    for name in PLOTS:
        width = driver.execute_script(
            "const i = document.querySelector(arguments[0]); return i ? i.naturalWidth : -1;",
            f"#plot-{name} img",
        )
        assert width > 0, f"plot {name} did not render"
    assert driver.find_elements("id", "drill-accuracy")
    # the dataset's script tag is text, not a script: nothing ran, the text is visible
    assert driver.execute_script("return document.scripts.length") == 0
    assert "<script>alert(1)</script>" in driver.find_element("id", "drilldown").text
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(int(height), 12000))
    shot = tmp_path / "report.png"
    driver.save_screenshot(str(shot))
    print(f"screenshot: {shot}")
    pixels = imread(str(shot))
    assert pixels.shape[0] > 2000 and pixels.shape[1] >= 1000
    assert pixels[..., :3].std() > 0.05  # not blank: text, tables and plots
    # the plots region has colour (the curves and bars), not just black on white
    rgb = pixels[..., :3]
    colourful = (rgb.max(axis=-1) - rgb.min(axis=-1)) > 0.3
    assert colourful.mean() > 0.005


def test_findings_and_every_model_fill_the_first_screen(driver, tmp_path):
    """At 1400 × 900 the findings and the overview are on the first screen; every finding
    links to an element of the page; the pairwise table is folded except against the
    reference."""
    out = tmp_path / "report"
    # symbolic (other data) as the reference: updn's evidence against the blind baseline
    # lies in the folded table of the other pairs
    report([FIX / "results_a", FIX / "results_b", FIX / "results_c"], out, n_bootstrap=100,
           reference="symbolic")  # fmt: skip
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        driver.get((out / "report.html").resolve().as_uri())
        order = driver.execute_script(
            "return [...document.querySelectorAll('body > section')].map(s => s.id)"
        )
        assert order == list(SECTIONS)  # findings first, plots before the long tables
        for section in ("findings", "overview"):
            top, bottom = driver.execute_script(
                "const r = document.getElementById(arguments[0]).getBoundingClientRect();"
                "return [r.top, r.bottom];",
                section,
            )
            assert top >= 0 and bottom <= 900, (section, top, bottom)
        verdicts = driver.find_elements("css selector", "#findings li[id^='finding-']")
        assert len(verdicts) >= 3
        links = driver.execute_script(
            "return [...document.querySelectorAll('#findings a, #drilldown a, #overview a')]"
            ".map(a => a.getAttribute('href'))"
        )
        assert links and all(h.startswith("#") for h in links)
        missing = [h for h in links if not driver.find_elements("id", h[1:])]
        assert missing == []
        opened = driver.execute_script(
            "return [...document.querySelectorAll('#comparisons details')].map(d => [d.id, d.open])"
        )
        assert opened == [["comparisons-reference", True], ["comparisons-others", False]]
        # a verdict's evidence link inside the folded table opens it when followed
        hidden = [h for h in links if driver.execute_script(
            "return !!document.getElementById(arguments[0]).closest('details:not([open])')", h[1:]
        )]  # fmt: skip
        assert hidden
        driver.get((out / "report.html").resolve().as_uri() + hidden[0])
        assert driver.execute_script("return document.getElementById('comparisons-others').open")
        shot = tmp_path / "first-screen.png"
        driver.save_screenshot(str(shot))
        print(f"screenshot: {shot}")
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
