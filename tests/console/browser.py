"""Headless Chromium (Debian's `chromium` and `chromium-driver`) driven through Selenium."""
import contextlib
import shutil

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def require_chromium():
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed: .ci/run installs the chromium and chromium-driver "
                    f"packages (apt-get install -y chromium chromium-driver)")


@contextlib.contextmanager
def chromium(width=1280, height=900):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    require_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(10)
    try:
        yield driver
    finally:
        driver.quit()


def log_in(driver, base, username, password, next_path):
    from selenium.webdriver.common.by import By

    driver.get(f"{base}/admin/login/?next={next_path}")
    driver.find_element(By.ID, "id_username").send_keys(username)
    driver.find_element(By.ID, "id_password").send_keys(password)
    submit(driver, driver.find_element(By.CSS_SELECTOR, "input[type=submit]"))


def submit(driver, element):
    """Click what loads a new page and wait until it replaced the old one: a lookup made at once
    could find the old page's element and go stale under it. Asked mid-navigation, Chromium can
    answer neither "still here" nor "stale" but "Node ... does not belong to the document":
    that answer means ask again."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.expected_conditions import staleness_of
    from selenium.webdriver.support.wait import WebDriverWait

    page = driver.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(driver, 30, ignored_exceptions=(WebDriverException,)).until(staleness_of(page))


class CuttableProxy:
    """A TCP proxy in front of the test server: the browser's page and socket go through it, and
    `cut()` drops every connection open now, as a network that fails does; it keeps listening."""

    def __init__(self, port: int):
        import socket
        import threading

        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.open += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source, sink) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.close()
                except OSError:
                    pass

    def cut(self) -> None:
        import socket

        with self.lock:
            ends, self.open = self.open, []
        for end in ends:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.cut()
        self.listener.close()
