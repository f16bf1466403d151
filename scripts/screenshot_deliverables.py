"""Screenshots of the deliverables a new user gets, to look at before calling a change to them done.

Starts the embedded stack (offline provider), runs four requests with uploaded files as a user would (a
dashboard app over tickets.csv, a landing page with an uploaded logo, a five-slide deck over sales.xlsx, a
report comparing two heating systems over a PDF and a photo), downloads each file, and renders it: the HTML
pages with headless Chromium (desktop and phone widths), the deck and the report with LibreOffice to PDF and
poppler's pdftoppm to PNG. Needs Debian's `chromium`, `libreoffice-writer`, `libreoffice-impress` and
`poppler-utils`. The PNGs are written to --out (default /tmp/canvas-screenshots) and are not committed.

    .venv/bin/python scripts/screenshot_deliverables.py [--out DIR] [--only app,landing,deck,report]
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KEY = "sk_canvas_screenshots_" + "s" * 26
TICKETS = (
    "ticket_id,category,opened,tickets,avg_resolution_hours\n"
    "1001,Billing,2024-01-02,12,4.5\n1002,Login,2024-01-03,30,12\n1003,Shipping,2024-01-04,8,18\n"
    "1004,Billing,2024-01-05,15,5.2\n1005,Login,2024-01-06,22,9.5\n1006,Refunds,2024-01-07,5,26\n"
)


def sales_xlsx() -> bytes:
    from tests.fakes.files import xlsx

    rows = [["Region", "Q1", "Q2"], ["North", 120, 140], ["South", 95, 110], ["West", 80, 99], ["East", 105, 131]]
    return xlsx({"Q1-Q2": rows})


def heating_pdf() -> bytes:
    from tests.fakes.files import pdf

    return pdf(
        [
            "A heat pump costs about 900 pounds a year to run in a typical home. Running costs of a gas boiler "
            "are about 1100 pounds a year at current prices.",
            "Installation of an air source heat pump takes two to three days. A gas boiler installation takes "
            "one day. Heat pump emissions are about 70 percent lower than a gas boiler.",
        ]
    )


def photo_png() -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (640, 400), (220, 232, 240))
    draw = ImageDraw.Draw(image)
    draw.rectangle((200, 140, 440, 330), fill=(120, 130, 140))
    draw.rectangle((230, 170, 410, 300), outline=(60, 60, 60), width=6)
    for x in range(245, 400, 20):
        draw.line((x, 180, x, 290), fill=(60, 60, 60), width=3)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def logo_png() -> bytes:
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (360, 120), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    draw.ellipse((14, 14, 106, 106), fill=(181, 101, 29))
    draw.text((130, 34), "Crumb & Co", fill=(80, 45, 15), font=ImageFont.load_default(size=40))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


SCENARIOS = {
    "app": ("Build a dashboard of our support tickets", "app", lambda: [("tickets.csv", TICKETS.encode())]),
    "landing": (
        "Make a landing page for our bakery; use the uploaded logo",
        "landing_page",
        lambda: [("crumb-logo.png", logo_png())],
    ),
    "deck": (
        "Make a deck of five slides on our quarterly sales by region",
        "slides",
        lambda: [("sales.xlsx", sales_xlsx())],
    ),
    "report": (
        "Write a report comparing heat pumps and gas boilers on running costs, installation and emissions",
        "report",
        lambda: [("heating-notes.pdf", heating_pdf()), ("boiler-room.png", photo_png())],
    ),
}


def run_scenarios(names: list[str], downloads: Path) -> dict[str, list[Path]]:
    import httpx

    from canvas_local.stack import LocalStack

    made: dict[str, list[Path]] = {}
    with (
        LocalStack(api_keys=[KEY]) as stack,
        httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY}, timeout=60) as http,
    ):
        for name in names:
            prompt, template, files = SCENARIOS[name]
            parts = [("files", (file, data, "application/octet-stream")) for file, data in files()]
            created = http.post("/v1/run", data={"prompt": prompt, "template": template}, files=parts)
            created.raise_for_status()
            run_id = created.json()["data"]["run_id"]
            deadline = time.monotonic() + 120
            while (data := http.get(f"/v1/run/{run_id}").json()["data"])["status"] == "running":
                if time.monotonic() > deadline:
                    raise SystemExit(f"{name}: the run did not finish in 120 s")
                time.sleep(0.3)
            print(f"{name}: {data['status']} {[e['error'] for e in data['errors']]}")
            made[name] = []
            for artifact in data.get("result", {}).get("artifacts", []):
                path = downloads / f"{name}-{artifact['name']}"
                path.write_bytes(httpx.get(artifact["download_url"], timeout=60).content)
                made[name].append(path)
    return made


def shoot_html(page: Path, out: Path) -> list[Path]:
    shots = []
    for label, size in (("desktop", "1280,2200"), ("phone", "390,2400")):
        target = out / f"{page.stem}-{label}.png"
        subprocess.run(
            [
                _tool("chromium"),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--window-size={size}",
                f"--screenshot={target}",
                page.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        shots.append(target)
    return shots


def shoot_office(document: Path, out: Path) -> list[Path]:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                _tool("soffice"),
                f"-env:UserInstallation=file://{profile}",
                "--headless",
                "--convert-to",
                "pdf",
                "--outdir",
                str(out),
                str(document),
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
    pdf = out / f"{document.stem}.pdf"
    subprocess.run([_tool("pdftoppm"), "-png", "-r", "50", str(pdf), str(out / document.stem)], check=True)
    return sorted(out.glob(f"{document.stem}-*.png"))


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise SystemExit(
            f"{name} is not installed: apt-get install chromium libreoffice-writer libreoffice-impress poppler-utils"
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/canvas-screenshots"))
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated: " + ", ".join(SCENARIOS))
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    args.out.mkdir(parents=True, exist_ok=True)
    made = run_scenarios(names, args.out)
    for files in made.values():
        for path in files:
            if path.suffix == ".html":
                shots = shoot_html(path, args.out)
            elif path.suffix in (".docx", ".pptx"):
                shots = shoot_office(path, args.out)
            else:
                continue
            print("\n".join(str(s) for s in shots))


if __name__ == "__main__":
    main()
