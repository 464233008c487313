"""What several pages share: session state, links, the navigation, the language,
widgets and text, the colour scale, uploads, the pinned baseline, the causal model's
loading, and the views more than one page draws (two sentences compared, a decoder's
notes, the toy model's answers)."""
