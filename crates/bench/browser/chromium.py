"""What the browser parts of plantd-bench share: headless Chromium through WebDriver (selenium),
a wait that polls every 50 ms, and the console's login."""

import shutil

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,2200"]:
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


def wait(d, what, timeout):
    return WebDriverWait(d, timeout, poll_frequency=0.05).until(lambda _: what())


def login(d, base, email, password):
    d.get(base + "/login")
    d.find_element(By.ID, "email").send_keys(email)
    d.find_element(By.ID, "password").send_keys(password)
    d.find_element(By.CSS_SELECTOR, "form[action='/login'] button[type=submit]").click()
    wait(d, lambda: "/login" not in d.current_url, 60)
