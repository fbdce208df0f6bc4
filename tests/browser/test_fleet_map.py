"""An admin acts on a node from the fleet map; everyone gets a hover card and keyboard moves."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import Page, expect

from scheduling.models import Job, Node
from tenants.models import AuditEvent
from tenants.roles import FLEET_ADMIN
from tests.browser.journeys import log_in, off_loop
from tests.factories import MembershipFactory, UserFactory
from tests.scheduling.conftest import build_fleet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_cordons_a_node_by_clicking_it_on_the_map(asgi_server: str, page: Page) -> None:
    fleet = off_loop(build_fleet)
    admin = UserFactory()
    admin.groups.add(Group.objects.get_or_create(name=FLEET_ADMIN)[0])
    node = fleet.nodes[2]
    log_in(page, asgi_server, admin.username)

    page.goto(f"{asgi_server}/fleet/")
    page.locator(f"#node-{node.pk}").hover()
    expect(page.locator("#node-card")).to_contain_text(f"{node.name} · H100")
    page.locator(f"#node-{node.pk}").click()
    expect(page.locator("#node-dialog")).to_be_visible()
    expect(page.locator("#node-dialog")).to_contain_text(node.name)
    page.locator("#node-dialog").get_by_role("button", name="Cordon", exact=True).click()

    expect(page.locator(".messages")).to_contain_text(f"{node.name}: cordon done, now cordoned")
    expect(page.locator(f"#node-{node.pk}")).to_have_class("node cordoned")
    assert Node.objects.get(pk=node.pk).state == Node.State.CORDONED
    assert AuditEvent.objects.get(kind=AuditEvent.Kind.NODE_CORDONED).actor == admin


def test_a_member_moves_across_nodes_with_the_keyboard_and_reads_their_cards(asgi_server: str, page: Page) -> None:
    fleet = off_loop(build_fleet)
    member = MembershipFactory(team=fleet.team).user
    fleet.submit(gpus=8, name="ours")
    off_loop(fleet.tick)
    log_in(page, asgi_server, member.username)

    page.goto(f"{asgi_server}/fleet/")
    first = page.locator(".node").first
    first.focus()
    expect(page.locator("#node-card")).to_be_visible()
    page.keyboard.press("ArrowRight")
    expect(page.locator(".node").nth(1)).to_be_focused()
    expect(page.locator("#node-dialog")).to_have_count(0)
    expect(page.locator(".node.mine")).to_have_count(1)
    page.locator(".node.mine").focus()
    expect(page.locator("#node-card")).to_contain_text("ours (8)")


# Every label's contrast with what shows behind it: its own backing composited over the darkest
# fill a node can have beneath it (the full bar) and over the lightest (white), the worse of the two.
LABEL_CONTRASTS = """() => {
  const rgba = (text) => { const [r, g, b, a] = text.match(/[\\d.]+/g).map(Number); return [r, g, b, a ?? 1]; };
  const over = (top, under) => top.slice(0, 3).map((c, i) => c * top[3] + under[i] * (1 - top[3]));
  const linear = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  const lum = (rgb) => { const [r, g, b] = rgb.map(linear); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ratio = (x, y) => {
    const [hi, lo] = [lum(x), lum(y)].sort((p, q) => q - p);
    return (hi + 0.05) / (lo + 0.05);
  };
  const fills = [[29, 79, 166], [47, 111, 222], [255, 255, 255]];
  return [...document.querySelectorAll(".node .node-label, .node .node-acc")].map((label) => {
    const style = getComputedStyle(label);
    const text = rgba(style.color).slice(0, 3);
    return Math.min(...fills.map((fill) => ratio(text, over(rgba(style.backgroundColor), fill))));
  });
}"""


def test_node_labels_read_on_every_fill_free_partly_used_and_full(asgi_server: str, page: Page) -> None:
    fleet = off_loop(build_fleet)
    member = MembershipFactory(team=fleet.team).user
    fleet.submit(gpus=4, name="half")
    fleet.submit(gpus=8, name="whole")
    off_loop(fleet.tick)
    Node.objects.filter(pk=fleet.nodes[3].pk).update(healthy_gpus=4, allocated_gpus=4)  # full, half its bar
    log_in(page, asgi_server, member.username)

    page.goto(f"{asgi_server}/fleet/")
    expect(page.locator(".node.full")).to_have_count(2)
    contrasts = page.evaluate(LABEL_CONTRASTS)

    assert len(contrasts) == 2 * len(fleet.nodes)
    assert min(contrasts) >= 4.5, contrasts


def test_drain_asks_first_listing_the_jobs_it_evicts_then_drains(asgi_server: str, page: Page) -> None:
    fleet = off_loop(build_fleet)
    admin = UserFactory()
    admin.groups.add(Group.objects.get_or_create(name=FLEET_ADMIN)[0])
    job = fleet.submit(gpus=8, name="on-the-node")
    off_loop(fleet.tick)
    node = Node.objects.get(allocations__job=job)
    log_in(page, asgi_server, admin.username)

    page.goto(f"{asgi_server}/fleet/")
    page.locator(f"#node-{node.pk}").click()
    page.locator("#node-dialog").get_by_role("button", name="Drain", exact=True).click()

    confirm = page.locator("#drain-confirm")
    expect(confirm).to_be_visible()
    expect(confirm).to_contain_text(f"#{job.pk} on-the-node · Language Models · 8 GPUs on this node")
    expect(confirm.get_by_role("link", name=f"#{job.pk} on-the-node")).to_have_attribute("href", f"/jobs/{job.pk}/")
    assert Node.objects.get(pk=node.pk).state == Node.State.UP  # nothing happened yet
    confirm.get_by_role("button", name="Back").click()
    expect(confirm).to_be_hidden()
    page.locator("#node-dialog").get_by_role("button", name="Drain", exact=True).click()
    confirm.get_by_role("button", name="Drain and evict 1 job").click()

    expect(page.locator(".messages")).to_contain_text(f"{node.name}: drain done, now cordoned")
    assert Node.objects.get(pk=node.pk).state == Node.State.CORDONED
    assert Job.objects.get(pk=job.pk).grace_until_s is not None
