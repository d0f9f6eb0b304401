# SPDX-License-Identifier: MIT
"""Billing: per second with a one-minute minimum per VM lifetime; a relaunch on the running VMs
continues their lifetime (mutations caught: every launch billed a fresh minimum; the minimum
dropped; the minimum left forgotten on a relaunch)."""

import pytest

from thrifty.search.billing import Billing
from thrifty.search.config import Config, needs_new_vms


def test_new_vms_pay_a_minute_at_least_and_the_running_ones_go_on():
    bill = Billing()
    bill.launch(3.6, new_vms=True)  # $0.001 per second
    bill.run(20)
    assert bill.cost_usd == pytest.approx(0.06)  # 20 s billed as the 60 s minimum
    bill.launch(3.6, new_vms=False)  # another batch on the same VMs: 40 s of the minimum left
    bill.run(30)
    assert bill.cost_usd == pytest.approx(0.06)
    bill.run(30)
    assert bill.cost_usd == pytest.approx(0.08)  # 80 s in all, nothing extra for the relaunch
    bill.launch(7.2, new_vms=True)  # another type: a new lifetime with its own minimum
    bill.run(1)
    assert bill.cost_usd == pytest.approx(0.08 + 0.12)
    restored = Billing()
    restored.restore(bill.state())
    assert restored.cost_usd == bill.cost_usd


def test_a_move_needs_new_vms_for_another_type_or_more_nodes():
    a = Config("a", 2, 2, 64)
    assert needs_new_vms(None, a) and needs_new_vms(a, Config("b", 2, 2, 64))
    assert needs_new_vms(a, Config("a", 4, 4, 64))
    assert not needs_new_vms(a, Config("a", 1, 1, 128)) and not needs_new_vms(a, Config("a", 2, 2, 32))
