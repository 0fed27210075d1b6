"""`graphfix verify` rejects wrong wrappers (issue 8): each mutant of tests/vllm/mutants.py replaces one
piece of a real patch by a plausible mistake inside a real affected release; verify must exit non-zero and
mark that patch's rows not fixed, while the real patches pass the same verify in the same process."""

import pytest

from tests.vllm.conftest import MUTANTS

pytestmark = pytest.mark.engine
CASES = [(version, name) for version, names in MUTANTS.items() for name in names.split(",")]
PATCH_OF = {"spec_draft_buffers": "vllm.spec_prefill_metadata", "sizes_one_size": "vllm.uniform_decode_sizes",
            "eagle_draft_buffers": "vllm.eagle_prefill_metadata"}


def rows(result, pid):
    return [r for r in result["rows"] if r["id"] == pid]


@pytest.mark.parametrize("version", sorted(MUTANTS))
def test_real_patches_pass_verify(version, mutants_in):
    control = mutants_in(version)["control"]
    assert control["rc"] == 0, control
    for name in MUTANTS[version].split(","):
        ours = rows(control, PATCH_OF[name])
        assert ours and all(r["state"] == "applied" and r["ok"] is True for r in ours), ours


@pytest.mark.parametrize("version,name", CASES)
def test_verify_rejects_the_mutant(version, name, mutants_in):
    result = mutants_in(version)[name]
    assert result["rc"] != 0, result
    ours = rows(result, PATCH_OF[name])
    assert ours and all(r["state"] == "applied" for r in ours), ours
    assert any(r["ok"] is False for r in ours), ours
    others = [r for r in result["rows"] if r["id"] != PATCH_OF[name] and r["ok"] is not None]
    assert all(r["ok"] is True for r in others), others  # only the mutated patch fails
