"""Building counterfactual items: answer swap, edit caption, image edit, verification."""
