"""label_embeddings: the three layouts of the oracle's label embeddings, hand-checked."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from vqadiag.models.reference.label_embeddings import (  # noqa: E402
    label_embeddings,
    needed_width,
)


def seeded(seed: int = 3) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_gaussian_draws_each_group_in_turn_as_randn_does():
    names, attrs = label_embeddings([3, 2], 4, "gaussian", seeded())
    draw = seeded()
    assert torch.equal(names, torch.randn(3, 4, generator=draw))
    assert torch.equal(attrs, torch.randn(2, 4, generator=draw))


def test_orthogonal_rows_are_orthogonal_across_groups_with_norm_root_dim():
    groups = label_embeddings([2, 1, 2], 5, "orthogonal", seeded())
    assert [g.shape for g in groups] == [(2, 5), (1, 5), (2, 5)]
    rows = torch.cat(groups)
    assert torch.allclose(rows @ rows.T, 5.0 * torch.eye(5), atol=1e-5)


def test_orthogonal_name_is_read_back_exactly_from_a_sum_with_attributes():
    names, attrs = label_embeddings([4, 3], 8, "orthogonal", seeded())
    patch = names[2] + attrs[0] + attrs[2]
    # each name's dot product with the patch, over D: 1 for the name in it, 0 elsewhere
    assert torch.allclose(names @ patch / 8.0, torch.tensor([0.0, 0.0, 1.0, 0.0]), atol=1e-5)


def test_split_puts_names_and_attributes_in_complementary_halves_scaled_to_norm_dim():
    names, colours, extra = label_embeddings([2, 3, 1], 5, "split", seeded())
    draw = seeded()  # half = 2: names in coordinates 0-1, the others in 2-4
    expected_names = torch.randn(2, 2, generator=draw) * math.sqrt(5 / 2)
    expected_colours = torch.randn(3, 3, generator=draw) * math.sqrt(5 / 3)
    expected_extra = torch.randn(1, 3, generator=draw) * math.sqrt(5 / 3)
    assert torch.allclose(names[:, :2], expected_names) and not names[:, 2:].any()
    assert torch.allclose(colours[:, 2:], expected_colours) and not colours[:, :2].any()
    assert torch.allclose(extra[:, 2:], expected_extra) and not extra[:, :2].any()
    assert not (names @ torch.cat([colours, extra]).T).any()


def test_too_many_orthogonal_rows_and_unknown_layouts_are_refused():
    with pytest.raises(ValueError, match="5 orthogonal embeddings do not fit in 4 dimensions"):
        label_embeddings([3, 2], 4, "orthogonal", seeded())
    with pytest.raises(ValueError, match="unknown embedding layout 'circle'"):
        label_embeddings([3], 4, "circle", seeded())


def test_only_the_orthogonal_layout_needs_a_width_of_one_direction_per_row():
    assert needed_width([21, 8, 48], "orthogonal") == 77
    assert needed_width([21, 8, 48], "split") == 0
    assert needed_width([21, 8, 48], "gaussian") == 0
