"""The detector race's models: where each is kept, so that a rerun trains only what its settings change."""

from __future__ import annotations

from dataclasses import replace

from lmms_contam.lab.race_models import CLEAN, RaceModel, RaceRecipe, plan


def test_a_models_folder_names_the_settings_that_made_it(tmp_path):
    recipe = RaceRecipe()
    folders = {model: model.folder(tmp_path, recipe) for model in plan(recipe)}
    assert len(set(folders.values())) == len(folders) == 1 + 3 * 5  # clean, then 4 kinds and a control per seed
    longer = replace(recipe, finetune_epochs=recipe.finetune_epochs + 5)
    assert RaceModel(CLEAN).folder(tmp_path, longer) == folders[RaceModel(CLEAN)]  # the clean model is kept
    assert RaceModel("control", 1).folder(tmp_path, longer) != folders[RaceModel("control", 1)]
    wider = replace(recipe, clean_steps=recipe.clean_steps + 1)
    assert not {model.folder(tmp_path, wider) for model in folders} & set(folders.values())
