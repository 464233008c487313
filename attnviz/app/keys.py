"""Every key the app gives Streamlit (widget keys and `st.session_state` entries), in one place.

Each key is declared once, with what it holds, under the modules that own it (the ones that
make its widget or write it, named under attnviz.app: ``_section("sidebar.sizes")`` declares
what follows it as ``attnviz/app/sidebar/sizes.py``'s); other modules may read it. A key is one
of three kinds:

- a plain key, ``SENTENCE = "sentence"``: one widget or one stored value;
- a family, ``STEP_MAP("scores")`` → ``"step_map_scores"``: one key per layer, step, matrix …;
- a suffix, ``SHOWN("mh_z")`` → ``"mh_z_shown"``: the widgets a helper adds beside the key it
  was given (a table's toggle, a chart's downloads, a pin button).

The sidebar's keys are the :class:`~attnviz.session.settings.Settings` fields
(``state.settings()`` reads them back). At the end: the keys whose options are shown in words
(``FORMATTED``) and the page picks a copied link carries (``LINK_DEFAULTS``).
``tests/test_keys.py`` holds the app to this: no module spells a key out, every key here is
used, a widget is made only by its key's owner, and every key session state holds after the
pages ran is declared. Declaring a name twice, or a family or suffix that could make a key
another declaration makes, raises at import.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Declared:
    """One declaration: a plain key, a family's prefix or a suffix, and its owners."""
    name: str
    owners: tuple[str, ...]           # modules under attnviz.app: "steps.page", "shared.state"
    kind: str                         # "key", "family" or "suffix"


REGISTRY: dict[str, Declared] = {}


class Family:
    """Keys made of a prefix and parts: ``Family("toy_heads_of_")(2)`` → ``"toy_heads_of_2"``."""

    def __init__(self, prefix: str) -> None:
        assert prefix.endswith("_"), prefix
        self.prefix = prefix

    def __call__(self, *parts: object) -> str:
        return self.prefix + "_".join(str(p) for p in parts)

    def owns(self, key: str) -> bool:
        return key.startswith(self.prefix)


class Suffix:
    """Keys made of another key and a suffix: ``Suffix("_shown")("mh_z")`` → ``"mh_z_shown"``."""

    def __init__(self, suffix: str) -> None:
        assert suffix.startswith("_"), suffix
        self.suffix = suffix

    def __call__(self, key: str) -> str:
        return key + self.suffix


def _register(value: str | Family | Suffix, owners: tuple[str, ...]) -> None:
    if isinstance(value, Family):
        name, kind = value.prefix, "family"
    elif isinstance(value, Suffix):
        name, kind = value.suffix, "suffix"
    else:
        name, kind = value, "key"
    if name in REGISTRY:
        raise ValueError(f"session-state key {name!r} declared twice")
    REGISTRY[name] = Declared(name, owners, kind)


_done = {name for name in globals() if name.isupper()}
_owners: tuple[str, ...] = ()


def _section(owners: str | None) -> None:
    """Register what was declared since the last call as that call's owners'; the
    declarations that follow are `owners`' (module names under attnviz.app, space-separated)."""
    global _owners
    for constant, value in list(globals().items()):
        declared = isinstance(value, (str, Family, Suffix))
        if constant.isupper() and constant not in _done and declared:
            _done.add(constant)
            _register(value, _owners)
    _owners = tuple(owners.split()) if owners else ()


_section("sidebar.input_source")
MODE = "mode"                           # where the input comes from (a Mode value)
PRESET = "preset"                       # the tutorial preset's name
X_TEXT = "x_text"                       # the typed matrix X
Q_TEXT = "q_text"                       # the typed matrix Q (mode Q, K, V)
K_TEXT = "k_text"                       # the typed matrix K (mode Q, K, V)
V_TEXT = "v_text"                       # the typed matrix V (mode Q, K, V)
_section("sidebar.input_source sidebar.real_model")
SENTENCE = "sentence"                   # the sentence typed in the sidebar
_section("sidebar.sizes")
D_MODEL = "d_model"                     # d_model (the embedding's width)
NUM_HEADS = "num_heads"                 # the number of heads
KV_HEADS = "kv_heads"                   # the K/V heads (grouped-query attention; 0 = one per head)
D_K = "d_k"                             # d_k, each head's query/key width
D_K_AUTO = "d_k_auto"                   # True: d_k follows d_model / heads
INIT = "init"                           # how random weights are drawn (an INIT_SCHEMES name)
SEED = "seed"                           # the random weights' seed
BIAS = "bias"                           # True: the projections have biases
# a button setting a setting to a suggested value (fix_<setting>_<value>)
FIX = Family("fix_")
_section("sidebar.options")
SCALED = "scaled"                       # True: scores are divided by √d_k
CAUSAL = "causal"                       # True: the causal mask
POSITIONAL = "positional"               # True: sinusoidal positions are added to X
ROPE = "rope"                           # True: rotary positions (RoPE) on Q and K
ROPE_BASE = "rope_base"                 # RoPE's base
ROUNDED = "rounded"                     # True: tables show rounded numbers
_section("sidebar.options sidebar.real_model")
MAX_TOKENS = "max_tokens"               # the longest input, in tokens
_section("sidebar.model_choice")
MODEL = "model"                         # the pretrained model (a registry name: minilm, smollm2 …)
LM_PICK = "lm_pick"                     # the language model a page that needs one uses (Generate):
                                        # shows keys.MODEL's, or the first one's; a pick sets MODEL
CMP_A = "cmp_a"                         # Compare models: the left column's language model
CMP_B = "cmp_b"                         # Compare models: the right column's language model
_section("sidebar.model_choice sidebar.input_source")
LAYER = "layer"                         # the pretrained model's layer the step pages show
_section("sidebar.fixed")
# a disabled copy of a setting showing the value in use (shown_<setting>)
SHOWN_SETTING = Family("shown_")

# ---- the session's own --------------------------------------------------------------------------
_section("shared.language")
LANG = "lang"                           # the page's language (zh / en); also the link's parameter
LANG_DRAWN = "lang_drawn"               # the language the browser's widgets were last drawn in
_section("main")
APP_RAN = "app_ran"                     # True once a run of the app finished in this session
LOADING_NOTICE = "loading_notice"       # the first visit's notice of what is loading (a container)
_section("shared.navigation")
NAV_LINKS = "nav_links"                 # the sidebar's links to every page (a container)
_section("shared.scales")
WEIGHT_SCALE = "weight_scale"           # the weights' colour scale
WEIGHT_SCALE_CHOSEN = "weight_scale_chosen"  # True once the user picked a scale
_section("shared.widgets")
IMAGE_FORMAT = "image_format"           # the charts' download format (png / svg)
_section("shared.state shared.links")
EDITS = "edits"                         # signature → {matrix name → attnviz.session.edits.Edit}
_section("shared.state")
# bumped when a matrix changes from elsewhere (the editors restart from the store)
MATRICES_VERSION = "matrices_version"
_section("shared.baseline")
BASELINE = "baseline"                   # the pinned baseline (a baseline.Pin)

# ---- links --------------------------------------------------------------------------------------
_section("shared.links")
LINK_READ = "link_read"                 # True once the link was read
LINK_SENT = "link_sent"                 # the widget values a session's first run was sent
LINK_CLICKED = "link_clicked"           # those of them a first click changed: set next run
LINK_TOO_LONG = "link_too_long"         # the settings left out of a too long link
LINK_NOTICES = "link_notices"           # what reading the link said
LINK_ASKED = "link_asked"               # the page picks the link gave, till the page ran
LINK_HAS_EDITS = "link_has_edits"       # True: edits in the link; False: too large; None: none
LINK_LOST_EDITS = "link_lost_edits"     # the matrices whose edits a reload or restart lost
LINK_LOST_EDITS_TOAST = "link_lost_edits_toast"  # True once the lost edits were toasted
LINK_RESTORED = "link_restored"         # the matrices restored from a file
RESTORE_EDITS_NPZ = "restore_edits_npz"  # the uploader restoring edits from a file
RESTORE_EDITS_NPZ_ERROR = "restore_edits_npz_error"  # why that file could not be read
KEEP_EDITS_NPZ = "keep_edits_npz"       # the button saving the edits to a file
DISMISS_LOST_EDITS = "dismiss_lost_edits"  # the button dismissing the lost-edits notice
_section("shared.links atlas.atlas_view")
AT_CORPUS_ASKED = "at_corpus_asked"     # a link's "user:<hash>" corpus, till the atlas page read it
_section("shared.links generate.generate_view")
GEN_FROM_LINK = "gen_from_link"         # tokens a link asks Generate to make again (its count)
GEN_LINK_COUNT = "gen_link_count"       # (the link's recipe, that count): said until Generate is pressed
GEN_LINK_PROMPT = "gen_link_prompt"     # a link's prompt: its next-token bars wait for a press when long

# ---- widgets every page uses --------------------------------------------------------------------
_section("shared.widgets")
HEAD = "head"                           # the head the step pages show
OVERFLOW_TO_CELL = "overflow_to_cell"   # the button opening the cell a number overflowed
OVERFLOW_RESET = "overflow_reset"       # the button resetting the edits after an overflow
SHOWN = Suffix("_shown")                # a table's show/hide toggle
NPZ = Suffix("_npz")                    # the .npz download button
CSV = Suffix("_csv")                    # the CSV download button
JSON = Suffix("_json")                  # the JSON download button
HTML = Suffix("_html")                  # the HTML report download button
DONE = Suffix("__done")                 # True for the run after an action button's action
_section("shared.text")
DROPPED = Suffix("_dropped")            # the invisible characters dropped from a text
_section("shared.uploads")
UPLOAD = Suffix("_upload")              # a matrix text's file uploader
UPLOAD_ERROR = Suffix("_upload_error")  # why that file could not be read
UPLOAD_NOTES = Suffix("_upload_notes")  # how that file was read

# ---- Home, Step by step, Multi-head, Inputs & weights -------------------------------------------
_section("home.page")
HOME_GRID = "home_grid"                 # Home's map of every head's weights
HOME_OUTPUT = "home_output"             # Home's map of the output
HOME_FILES = "home_files"               # Home's downloads (the base of their keys)
HOME_START = "home_start"               # Home's button: Step by step on a tutorial's preset
_section("steps.page")
STEP = "step"                           # the step Step by step shows
# Step by step's previous / next buttons (step_go_-1, step_go_+1)
STEP_GO = Family("step_go_")
STEP_MAP = Family("step_map_")          # Step by step's map of one step
STEP_TABLE = Family("step_table_")      # Step by step's table of one step
STEPS_FILES = "steps_files"             # Step by step's downloads (the base of their keys)
_section("steps.steps_view")
QUERY = "query"                         # the query the weighted values show
VECTOR = "vector"                       # the base of the one-query view's table toggle
VECTOR_VIEW = "vector_view"             # the one-query view's choice of chart
VECTOR_QUERY = "vector_query"           # the one-query view's query
VECTOR_BARS = "vector_bars"             # the one-query view's bars
VECTOR_WEIGHTED = "vector_weighted"     # the one-query view's weighted values
VECTOR_SUM = "vector_sum"               # the one-query view's sum
_section("multihead.page")
MH_SECTION = "mh_section"               # Multi-head's open tab
MH_FILES = "mh_files"                   # Multi-head's downloads (the base of their keys)
MH_GRID = "mh_grid"                     # Multi-head's map of every head's weights
MH_HEAD = "mh_head"                     # the head whose Z Multi-head shows
MH_Z = "mh_z"                           # Multi-head's map of one head's Z
MH_Z_TABLE = "mh_z_table"               # its table
MH_CONCAT = "mh_concat"                 # Multi-head's map of the concatenation
MH_CONCAT_TABLE = "mh_concat_table"     # its table
MH_WO = "mh_wo"                         # Multi-head's map of W_O
MH_OUTPUT = "mh_output"                 # Multi-head's map of the output
MH_OUTPUT_TABLE = "mh_output_table"     # its table
_section("shared.decoder_view")
MH_KV_SHARING = "mh_kv_sharing"         # the map of which heads share K/V
ROPE_ANGLES = Family("rope_angles_")    # the rotation angles' chart of a step
_section("shared.compare_view")
MH_COMPARE = "mh_compare"               # the base of the second sentence's maps
MH_COMPARE_HEAD = "mh_compare_head"     # the head the second sentence's maps show
FIRST = Suffix("_first")                # the first sentence's map beside the second's
SECOND = Suffix("_second")              # the second sentence's map
DELTA = Suffix("_delta")                # the map of the difference
_section("inputs.page")
MATRIX = "matrix"                       # the matrix Inputs & weights edits
EDIT_HEAD = "edit_head"                 # the head whose matrix Inputs & weights edits
_section("inputs.editor")
WEIGHT_EDITOR = "weight_editor"         # the EditorMount of the data editor on the page
# the weight editor's grid (editor_<matrix>_<head>_<number>)
EDITOR = Family("editor_")
EDIT_HEATMAP = "edit_heatmap"           # the edited matrix's map
RANDOMISE = "randomise"                 # the button drawing new random weights
RESET_EDITS = "reset_edits"             # the button dropping the edits
# a pasted matrix (paste_text_<matrix>_<head>_<version>_<digest>)
PASTE_TEXT = Family("paste_text_")
PASTE_NOTES = Family("paste_notes_")    # how a pasted matrix was read
PASTE_ERROR = Family("paste_error_")    # why a pasted matrix could not be used
APPLY = Family("apply_")                # the button applying a pasted matrix
PASTE_FORM = Family("paste_form_")      # the box and that button, sent together
# a matrix's file uploader (upload_<matrix>_<head>_<version>)
UPLOAD_MATRIX = Family("upload_")

# ---- the baseline -------------------------------------------------------------------------------
INPUTS_BASELINE = "inputs_baseline"     # the base of Inputs & weights' pin buttons
_section("shared.baseline")
STEPS_BASELINE = "steps_baseline"       # the base of Step by step's pin buttons
PIN = Suffix("_pin")                    # the button pinning the baseline
UNPIN = Suffix("_unpin")                # the button dropping it
DELTA_MAP = Family("delta_map_")        # a step's change from the baseline
DELTA_TABLE = Family("delta_table_")    # its table
DELTA_KL = "delta_kl"                   # the weights' change in bits (KL) per query
DELTA_KL_TABLE = "delta_kl_table"       # its table

# ---- Experiments --------------------------------------------------------------------------------
_section("experiments.page")
EXPERIMENT = "experiment"               # Experiments' open tab (its label)
_section("experiments.experiments_view")
EXP_DK = "exp_dk"                       # Scaling: d_k
EXP_HIST = "exp_hist"                   # Scaling: the dot products' histogram
EXP_ROW = "exp_row"                     # Scaling: one row's weights
EXP_TIED_SOURCE = "exp_tied_source"     # Tied Q/K: the tutorial's X or the user's
EXP_TIED_SCORES = Family("exp_tied_scores_")  # Tied Q/K: a map of scores (tied / separate)
EXP_TIED_TABLE = Family("exp_tied_table_")  # its table
EXP_RAW_SOURCE = "exp_raw_source"       # Raw X: the tutorial's X or the user's
EXP_RAW_SIM = "exp_raw_sim"             # Raw X: the similarities
EXP_RAW_W = "exp_raw_w"                 # Raw X: the weights
EXP_RAW_TABLE = "exp_raw_table"         # its table
EXP_SHUFFLE = "exp_shuffle"             # Order: the shuffle button
EXP_SHUFFLE_SEED = "exp_shuffle_seed"   # Order: the shuffles so far
EXP_PE = "exp_pe"                       # Order: the positional encoding
EXP_LEN = "exp_len"                     # Masks: the sequence's length
EXP_CAUSAL = "exp_causal"               # Masks: the causal mask
EXP_MASKED = "exp_masked"               # Masks: the masked scores
EXP_MASK_W = "exp_mask_w"               # Masks: the weights
EXP_MASK_TABLE = "exp_mask_table"       # its table
EXP_CROSS_TEXT = "exp_cross_text"       # Cross-attention: the other sentence
EXP_CROSS = "exp_cross"                 # Cross-attention: the weights
EXP_CROSS_TABLE = "exp_cross_table"     # its table
EXP_BUG_OK = "exp_bug_ok"               # The bug: the correct weights
EXP_BUG = "exp_bug"                     # The bug: the buggy weights
EXP_BUG_TABLE = "exp_bug_table"         # its table
EXP_ROPE_SOURCE = "exp_rope_source"     # RoPE: the model's sentence or random vectors
EXP_ROPE_TEXT = "exp_rope_text"         # RoPE: the model's sentence
EXP_ROPE_CHART = "exp_rope_chart"       # RoPE: the score against distance
EXP_ROPE_OFFSET = "exp_rope_offset"     # RoPE: the shift of both positions
EXP_ROPE_LAYER = "exp_rope_layer"       # RoPE: the model's layer
EXP_ROPE_HEAD = "exp_rope_head"         # RoPE: the model's head
EXP_ROPE_QUERY = "exp_rope_query"       # RoPE: the query token
EXP_ROPE_KEY = "exp_rope_key"           # RoPE: the key token
EXP_ROPE_D = "exp_rope_d"               # RoPE (random vectors): their width
EXP_ROPE_SEED = "exp_rope_seed"         # RoPE (random vectors): their seed
EXP_ROPE_M = "exp_rope_m"               # RoPE (random vectors): the query's position
EXP_ROPE_N = "exp_rope_n"               # RoPE (random vectors): the key's position
EXP_ROPE_BASE = "exp_rope_base"         # RoPE (random vectors): the base
EXP_SINK_TEXT = "exp_sink_text"         # Attention sink: the model's sentence
EXP_SINK_LAYERS = "exp_sink_layers"     # Attention sink: weight on the first token per layer
EXP_SINK_NEXT = "exp_sink_next"         # Attention sink: the next token with and without it
EXP_SINK_TABLE = Family("exp_sink_table_")  # its table (before / after masking)
EXP_WINDOW_TEXT = "exp_window_text"     # Sliding window: the text repeated to 600 tokens
EXP_WINDOW_CHART = "exp_window_chart"   # Sliding window: the last query's weights
EXP_REACH_CHART = "exp_reach_chart"     # Sliding window: how far back each layer sees
EXP_QK_TEXT = "exp_qk_text"             # QK-norm: the model's sentence
EXP_QK_CHART = "exp_qk_chart"           # QK-norm: the scores' range per layer
EXP_KV_CHART = "exp_kv_chart"           # KV cache: bytes per token of each design
EXP_KV_TABLE = "exp_kv_table"           # KV cache: the table

# ---- Pretrained model ---------------------------------------------------------------------------
_section("pretrained.page pretrained.decoder_page")
# Pretrained model's open tab (its label), MiniLM's or SmolLM2's
PT_VIEW = "pt_view"
_section("pretrained.pretrained_view")
PT_HIDE_SPECIAL = "pt_hide_special"     # True: [CLS]/[SEP] hidden
_section("pretrained.page")
PT_MODEL_VIEW = "pt_model_view"         # the model view (every layer × head)
PT_LAYER = "pt_layer"                   # one head's layer
PT_HEAD = "pt_head"                     # one head's head
PT_HEAD_HEATMAP = "pt_head_heatmap"     # one head's map
PT_HV_LAYER = "pt_hv_layer"             # the head view's layer
PT_HV_TOKEN = "pt_hv_token"             # the head view's token: a position, or EVERY_TOKEN
PT_HV_HEADS = "pt_hv_heads"             # the heads the head view draws
PT_HEAD_VIEW = "pt_head_view"           # the head view
_section("pretrained.pretrained_view")
PT_COMPARE = "pt_compare"               # the second sentence, and the base of its maps
_section("pretrained.pretrained_view reading.reading_view")
PT_STEP_THROUGH = "pt_step_through"     # the button opening a head on Step by step
_section("pretrained.decoder_page")
PT_DEC_MODEL_VIEW = "pt_dec_model_view"  # SmolLM2: the model view
PT_DEC_LAYER = "pt_dec_layer"           # SmolLM2: one head's layer
PT_DEC_HEAD = "pt_dec_head"             # SmolLM2: one head's head
PT_DEC_HEATMAP = "pt_dec_heatmap"       # SmolLM2: one head's map
PT_DEC_HV_LAYER = "pt_dec_hv_layer"     # SmolLM2: the head view's layer
PT_DEC_HV_TOKEN = "pt_dec_hv_token"     # SmolLM2: the head view's token (as PT_HV_TOKEN)
PT_DEC_HV_HEADS = "pt_dec_hv_heads"     # SmolLM2: the heads the head view draws
PT_DEC_HEAD_VIEW = "pt_dec_head_view"   # SmolLM2: the head view

# ---- Read the model -----------------------------------------------------------------------------
_section("reading.page")
RD_VIEW = "rd_view"                     # Read the model's open tab (its label)
_section("reading.reading_view")
RO_LAYER = "ro_layer"                   # Rollout: after which layer
RO_ROLLOUT = "ro_rollout"               # Rollout: the map
RO_RAW = "ro_raw"                       # Rollout: the raw weights' map
RO_RESIDUAL = "ro_residual"             # Rollout: True counts the residual
RO_TOKEN = "ro_token"                   # Rollout: the token whose bars show
RO_BARS = "ro_bars"                     # Rollout: that token's bars
RO_RAW_BARS = "ro_raw_bars"             # Rollout: its raw weights' bars
VW_LAYER = "vw_layer"                   # Value-weighted: the layer
VW_HEAD = "vw_head"                     # Value-weighted: the head
VW_WEIGHTS = "vw_weights"               # Value-weighted: α
VW_NORMS = "vw_norms"                   # Value-weighted: ‖αf(x)‖
VW_TABLE = "vw_table"                   # Value-weighted: what survives
HS_TABLE = "hs_table"                   # Head statistics: the sortable table
HS_COLUMN = "hs_column"                 # Head statistics: the statistic mapped
HS_MAP = "hs_map"                       # Head statistics: the layers × heads map
HS_HEADS = "hs_heads"                   # Head statistics: the heads per layer of the table's rows
HS_LAYER = "hs_layer"                   # Head statistics: the opened head's layer
HS_HEAD = "hs_head"                     # Head statistics: the opened head
AB_HEADS = "ab_heads"                   # Ablation: the heads typed to switch off (L3H2, L5)
AB_MASK = "ab_mask"                     # Ablation: the map of what is off
AB_OTHER = "ab_other"                   # Ablation: the second sentence
AB_TARGET = "ab_target"                 # Ablation (SmolLM2): the next token measured
AB_RANK = "ab_rank"                     # Ablation: the button ranking every head
AB_RANK_STOP = "ab_rank_stop"           # Ablation (SmolLM2): the button leaving the ranking
AB_RANK_JOB = "ab_rank_job"             # Ablation (SmolLM2): (the ranking's key, the queue's
                                        # job, this learner's token) while they wait for it
AB_RANK_STOPPED = "ab_rank_stopped"     # Ablation (SmolLM2): True after a Stop (said once)
AB_TOP = "ab_top"                       # Ablation: the ranking's top heads
AB_MAP = "ab_map"                       # Ablation: the ranking's map
LENS_SUBLAYERS = "lens_sublayers"       # Logit lens: True adds the rows after each attention
LENS_COLOUR = "lens_colour"             # Logit lens: the cells coloured by "top" or "target"
LENS_GRID = "lens_grid"                 # Logit lens: the rows × positions grid
LENS_COLUMN = "lens_column"             # Logit lens: the last position's column, drawn in the
                                        # grid's place while the other positions are computed
LENS_POSITION = "lens_position"         # Logit lens: the position whose top tokens show
LENS_LAYER = "lens_layer"               # Logit lens: the layer boundary whose bars show
LENS_ATTENTION = "lens_attention"       # Logit lens (with sublayers): True reads that layer
                                        # before its MLP, the row after its attention
LENS_BARS = "lens_bars"                 # Logit lens: that cell's top-10 bars
LENS_RANK = "lens_rank"                 # Logit lens: the target's rank across the rows
LENS_KIND = "lens_kind"                 # Logit lens: each layer read by the "logit" or the
                                        # "tuned" lens (its translators first)
LENS_KL = "lens_kl"                     # Logit lens (tuned): both lenses' KL across the rows
LENS_TUNED_WAITED = "lens_tuned_waited"  # Logit lens (tuned): the fit this learner waited for,
                                        # whose outcome is said to them once
LENS_TUNED_FIT = "lens_tuned_fit"       # Logit lens (tuned): the button starting the fit
LENS_TUNED_CANCEL = "lens_tuned_cancel"  # Logit lens (tuned): the button leaving the fit
LENS_TUNED_JOB = "lens_tuned_job"       # Logit lens (tuned): (the fit's key, the queue's job,
                                        # this learner's token) while they wait for it
LENS_TUNED_CANCELLED = "lens_tuned_cancelled"  # Logit lens (tuned): True after a Cancel
                                        # (said once)

# ---- Trace the answer ---------------------------------------------------------------------------
_section("trace.page")
TR_VIEW = "tr_view"                     # Trace the answer's open tab (its label)
_section("trace.trace_view")
TR_USE_LM = "tr_use_lm"                 # the button choosing the language model (MiniLM chosen)
TR_PAIR = "tr_pair"                     # Patching: the preset pair (or "custom")
TR_CLEAN = "tr_clean"                   # Patching: the clean prompt
TR_CORRUPTED = "tr_corrupted"           # Patching: the corrupted prompt
TR_ANSWER_CLEAN = "tr_answer_clean"     # Patching: the clean prompt's answer ("": its top token)
TR_ANSWER_CORRUPTED = "tr_answer_corrupted"  # Patching: the corrupted prompt's answer
TR_WHERE = "tr_where"                   # Patching: what is patched (patching.WHERE)
TR_LAYER = "tr_layer"                   # Patching: the layer of "each head at each position"
TR_PATCH = "tr_patch"                   # Patching: the button starting it
TR_STOP = "tr_stop"                     # Patching: the button stopping it
TR_RESUME = "tr_resume"                 # Patching: the button going on after a stop
TR_RAN = "tr_ran"                       # Patching: True once patched (a link shows it, never patches)
TR_JOB = "tr_job"                       # Patching: (settings, the queue's job, this learner's token)
TR_STOPPED_FOR = "tr_stopped_for"       # Patching: the settings whose patching was stopped
TR_MAP = "tr_map"                       # Patching: the effect map
TR_PICK = "tr_pick"                     # Patching: the head clicked on a heads map (where, layer, head)
FL_POSITION = "fl_position"             # Information flow: the position traced
FL_THRESHOLD = "fl_threshold"           # Information flow: the smallest importance kept
FL_HEADS = "fl_heads"                   # Information flow: True, one edge per head
FL_GRAPH = "fl_graph"                   # Information flow: the graph
FL_EDGE = "fl_edge"                     # Information flow: the edge clicked (layer, head, …)

# ---- Compare models -----------------------------------------------------------------------------
_section("compare.compare_view")
CMP_LAYER_A = "cmp_layer_a"             # the layer shown of the left column's model
CMP_HEAD_A = "cmp_head_a"               # … and its head
CMP_LAYER_B = "cmp_layer_b"             # the layer shown of the right column's model
CMP_HEAD_B = "cmp_head_b"               # … and its head
CMP_MAP = Family("cmp_map_")            # a column's head map (a, b)
CMP_SINK = Family("cmp_sink_")          # a column's weights on the first token
CMP_LENS = Family("cmp_lens_")          # a column's lens of the last position
CMP_FILES = "cmp_files"                 # both runs' files
CMP_CONTINUE = "cmp_continue"           # the button asking for both continuations
CMP_ASKED = "cmp_asked"                 # (text, limit) whose continuations were asked for

# ---- Head atlas ---------------------------------------------------------------------------------
_section("atlas.atlas_view")
AT_CORPUS = "at_corpus"                 # the corpus: a bundled one's name (en, zh, all) or "custom"
AT_TEXTS = "at_texts"                   # the learner's texts, separated by blank lines
AT_UPLOAD = "at_upload"                 # a file of texts (.txt, .jsonl, .csv)
AT_KEPT_UPLOAD = "at_kept_upload"       # (file name, its texts) a link's corpus brought back
AT_FORGET_UPLOAD = "at_forget_upload"   # the button leaving those texts out
AT_CORPUS_NAMED = "at_corpus_named"     # "user:<hash>" of the learner's corpus (kept on the server)
AT_CORPUS_UNKNOWN = "at_corpus_unknown"  # the "user:<hash>" a link named that the server has not
AT_BUILD = "at_build"                   # the button building the atlas
AT_STOP = "at_stop"                     # the button stopping it
AT_RESUME = "at_resume"                 # the button going on after a stop
AT_JOB = "at_job"                       # (the atlas's key, the queue's job, this learner's token)
AT_STOPPED_FOR = "at_stopped_for"       # the atlas's key whose build was stopped
AT_X = "at_x"                           # the scatter's horizontal metric
AT_Y = "at_y"                           # the scatter's vertical metric
AT_LAYER = "at_layer"                   # the head opened: its layer
AT_HEAD = "at_head"                     # … and its head
AT_SCATTER = "at_scatter"               # every head as a point
AT_HEADS_COLOUR = "at_heads_colour"     # … coloured by "layer" or "cluster" (of mean patterns)
AT_EXAMPLE = Family("at_example_")      # a top example's row of attention
AT_MAP = "at_map"                       # the opened head's query/key map
AT_METHOD = "at_method"                 # … drawn by "pca" or "tsne"
AT_COLOUR = "at_colour"                 # … coloured by "kind" (query / key) or "position"
AT_ROTATED = "at_rotated"               # … of its queries and keys after RoPE (else before)
AT_GRID = "at_grid"                     # every head's PCA map at once, a cell a head
AT_TSNE_RUN = "at_tsne_run"             # the button computing its t-SNE
AT_TSNE_STOP = "at_tsne_stop"           # the button stopping it
AT_TSNE_JOB = "at_tsne_job"             # (the t-SNE's key, the queue's job, this learner's token)
AT_TSNE_STOPPED_FOR = "at_tsne_stopped_for"   # the t-SNE's key whose job was stopped
AT_CSV = "at_csv"                       # the per-head table's download
AT_JSON = "at_json"                     # … the same table as JSON records
AT_FILE = "at_file"                     # the atlas .npz's download

# ---- Generate -----------------------------------------------------------------------------------
_section("generate.generate_view")
GENERATE_RUN = "generate_run"           # {'recipe': (text, chat, temperature, seed), 'generation': …}
GEN_PROMPT = "gen_prompt"               # the prompt
GEN_CHAT = "gen_chat"                   # True: the prompt in the chat template
GEN_SAMPLING = "gen_sampling"           # greedy / sample
GEN_TEMPERATURE = "gen_temperature"     # the sampling temperature
GEN_SEED = "gen_seed"                   # the sampling seed
GEN_COUNT = "gen_count"                 # how many tokens 'Generate' adds
GEN_STEP = "gen_step"                   # the generation step shown
GEN_LAYER = "gen_layer"                 # the layer shown
GEN_NEXT = "gen_next"                   # the button adding one token
GEN_MANY = "gen_many"                   # the button adding gen_count tokens
GEN_RESET = "gen_reset"                 # the button starting again
GEN_NEXT_BARS = "gen_next_bars"         # the next token's candidates
GEN_NEXT_SHOW = "gen_next_show"         # the button computing them for a link's long prompt
GEN_STEP_BARS = "gen_step_bars"         # the step's weights over the cache
GEN_LENS = "gen_lens"                   # the step's logit lens: its position after each layer
GEN_ROW_MAP = "gen_row_map"             # every head's row at the step
GEN_SINK_MAP = "gen_sink_map"           # the weight on the first token per layer and head
GEN_CACHE_BARS = "gen_cache_bars"       # the KV cache's size per step

# ---- Train and the Toy model input --------------------------------------------------------------
_section("train.train_view")
TOY_TASK = "toy_task"                   # the task trained
TOY_LENGTH = "toy_length"               # the sequences' length
TOY_VOCAB = "toy_vocab"                 # the vocabulary's size
TOY_LAYERS = "toy_layers"               # the toy model's layers
TOY_HEADS = "toy_heads"                 # its heads per layer
TOY_D_MODEL = "toy_d_model"             # its d_model
TOY_SEED = "toy_seed"                   # the training's seed
TOY_STEPS = "toy_steps"                 # how many steps to train
TOY_TRAIN = "toy_train"                 # the Train button
TOY_STOP = "toy_stop"                   # the Stop button
TOY_JOB = "toy_job"                     # the TrainingJob running (or just ended) in this session
TOY_REFUSED = "toy_refused"             # why the pool refused a run
TOY_RUN = "toy_run"                     # the last finished ToyRun
TOY_STEP = "toy_step"                   # the checkpoint the Train page shows
TOY_EXAMPLE = "toy_example"             # the held-out sequence the Train page shows
TOY_HEADS_OF = Family("toy_heads_of_")  # the heads map of a layer
TOY_STEP_THROUGH = Family("toy_step_through_")  # the button opening a layer's head on Step by step
_section("sidebar.input_source")
TOY_VIEW_STEP = "toy_view_step"         # the checkpoint the Toy model input shows
TOY_VIEW_EXAMPLE = "toy_view_example"   # the held-out sequence it shows
_section("shared.toy_view")
TOY_ANSWERS = "toy_answers"             # the Toy model input's answers

_section(None)

# the keys whose options are shown through a translated format_func. The browser matches a
# widget's value to the label it last drew, so after a switch it would show the old language's
# label (a selectbox) or nothing selected (a radio): attnviz.app.shared.language gives their values
# again on a switch, which redraws them.
FORMATTED = (MODE, PRESET, KV_HEADS, INIT, MODEL, LM_PICK, CMP_A, CMP_B, CMP_LAYER_A, CMP_HEAD_A,
             CMP_LAYER_B, CMP_HEAD_B, HEAD, WEIGHT_SCALE, STEP, QUERY, VECTOR_QUERY,
             MH_HEAD, MH_COMPARE_HEAD, MATRIX, EDIT_HEAD, EXP_TIED_SOURCE, EXP_RAW_SOURCE,
             EXP_ROPE_SOURCE, RO_LAYER, LENS_LAYER, LENS_COLOUR, LENS_KIND, TR_PAIR, TR_WHERE,
             VW_LAYER, VW_HEAD, HS_COLUMN, HS_LAYER, HS_HEAD,
             GEN_SAMPLING, GEN_LAYER, TOY_TASK, AT_CORPUS, AT_X, AT_Y, AT_METHOD, AT_COLOUR,
             AT_HEADS_COLOUR)
# the page picks a copied link carries, each with its default (attnviz.app.shared.links): a link
# holds those whose value differs from it. None: a default the page chooses (the model's last
# layer, the text's most likely token, the prompt box's example), so any value there is carried,
# read as LINK_KINDS says. tests/test_link_views.py finds every keyed widget of every page and
# holds each to a link.
LINK_DEFAULTS = {
    HEAD: 0, STEP: "", QUERY: 0, VECTOR_QUERY: 0, MH_HEAD: 0, MATRIX: "", EDIT_HEAD: 0,
    # every page's weights colour scale and chart image format; Step by step and Multi-head
    WEIGHT_SCALE: None, IMAGE_FORMAT: "png", VECTOR_VIEW: False, MH_SECTION: "",
    MH_COMPARE: "", MH_COMPARE_HEAD: 0,
    # Experiments (its tab, and each tab's picks)
    EXPERIMENT: "", EXP_DK: None, EXP_TIED_SOURCE: None, EXP_RAW_SOURCE: None,
    EXP_SHUFFLE_SEED: 0, EXP_LEN: None, EXP_CAUSAL: False, EXP_CROSS_TEXT: None,
    EXP_ROPE_SOURCE: None, EXP_ROPE_TEXT: None, EXP_ROPE_OFFSET: None, EXP_ROPE_LAYER: None,
    EXP_ROPE_HEAD: None, EXP_ROPE_QUERY: None, EXP_ROPE_KEY: None, EXP_ROPE_D: None,
    EXP_ROPE_SEED: None, EXP_ROPE_M: None, EXP_ROPE_N: None, EXP_ROPE_BASE: None,
    EXP_SINK_TEXT: None, EXP_WINDOW_TEXT: None, EXP_QK_TEXT: None,
    # Train (its form; the checkpoint and sequence shown once a run is trained again)
    TOY_TASK: None, TOY_LENGTH: None, TOY_VOCAB: None, TOY_LAYERS: None, TOY_HEADS: None,
    TOY_D_MODEL: None, TOY_SEED: None, TOY_STEPS: None, TOY_STEP: None, TOY_EXAMPLE: None,
    # Pretrained model (tabs hold their label, in any language: pretrained_view.keep_tab)
    PT_VIEW: "", PT_LAYER: 0, PT_HEAD: 0, PT_HV_LAYER: 0,
    PT_HV_TOKEN: -1, PT_DEC_HV_TOKEN: -1,    # every token (pretrained_view.EVERY_TOKEN)
    PT_HV_HEADS: None,
    PT_HIDE_SPECIAL: None, PT_COMPARE: "", PT_DEC_LAYER: None, PT_DEC_HEAD: 0,
    PT_DEC_HV_LAYER: 0, PT_DEC_HV_HEADS: None,
    # Read the model
    RD_VIEW: "", RO_LAYER: None, RO_RESIDUAL: True, RO_TOKEN: None, VW_LAYER: 0, VW_HEAD: 0,
    HS_COLUMN: None, HS_LAYER: 0, HS_HEAD: 0, AB_HEADS: "", AB_OTHER: None, AB_TARGET: None,
    LENS_SUBLAYERS: False, LENS_COLOUR: "top", LENS_POSITION: None, LENS_LAYER: None,
    LENS_ATTENTION: False, LENS_KIND: "logit",
    # Trace the answer
    TR_VIEW: "", TR_PAIR: "ioi", TR_CLEAN: None, TR_CORRUPTED: None, TR_ANSWER_CLEAN: None,
    TR_ANSWER_CORRUPTED: None, TR_WHERE: "resid", TR_LAYER: None, TR_RAN: False,
    FL_POSITION: None, FL_THRESHOLD: 0.04, FL_HEADS: True,
    # Compare models (its two models: a link's unknown name is the column's default)
    CMP_A: None, CMP_B: None, CMP_LAYER_A: None, CMP_HEAD_A: 0, CMP_LAYER_B: None,
    CMP_HEAD_B: 0,
    # Generate (and the number of tokens generated: attnviz.app.shared.links.GEN_TOKENS_PARAM)
    GEN_PROMPT: None, GEN_CHAT: False, GEN_SAMPLING: "greedy", GEN_TEMPERATURE: None,
    GEN_SEED: 0, GEN_COUNT: None, GEN_STEP: None, GEN_LAYER: None,
    # Head atlas (its corpus: the bundled one of the page's language unless chosen; the
    # learner's own by its hash, LINK_STAND_INS)
    AT_CORPUS: None, AT_X: "entropy", AT_Y: "induction", AT_LAYER: 0,
    AT_HEAD: 0, AT_METHOD: "pca", AT_COLOUR: "kind", AT_ROTATED: True,
    AT_HEADS_COLOUR: "layer"}
# what a link's text is read as, where the default does not say: int, float, bool, str, list
# (whole numbers separated by commas), "name" (one of a few choices) or "tab" (a tab's label)
LINK_KINDS = {PT_HV_HEADS: list, PT_DEC_HV_HEADS: list,
              PT_HIDE_SPECIAL: bool, PT_DEC_LAYER: int, RO_LAYER: int, RO_TOKEN: int,
              AB_OTHER: str, AB_TARGET: int, LENS_POSITION: int, LENS_LAYER: int,
              TR_CLEAN: str, TR_CORRUPTED: str, TR_ANSWER_CLEAN: str, TR_ANSWER_CORRUPTED: str,
              TR_LAYER: int, FL_POSITION: int, GEN_PROMPT: str, CMP_A: "name", CMP_B: "name",
              CMP_LAYER_A: int, CMP_LAYER_B: int,
              GEN_TEMPERATURE: float, GEN_COUNT: int, GEN_STEP: int, GEN_LAYER: int,
              EXP_DK: int, EXP_LEN: int, EXP_CROSS_TEXT: str, EXP_ROPE_TEXT: str,
              EXP_ROPE_OFFSET: int, EXP_ROPE_LAYER: int, EXP_ROPE_HEAD: int, EXP_ROPE_QUERY: int,
              EXP_ROPE_KEY: int, EXP_ROPE_D: int, EXP_ROPE_SEED: int, EXP_ROPE_M: int,
              EXP_ROPE_N: int, EXP_ROPE_BASE: float, EXP_SINK_TEXT: str,
              EXP_WINDOW_TEXT: str, EXP_QK_TEXT: str,
              TOY_LENGTH: int, TOY_VOCAB: int, TOY_LAYERS: int, TOY_HEADS: int, TOY_D_MODEL: int,
              TOY_SEED: int, TOY_STEPS: int, TOY_STEP: int, TOY_EXAMPLE: int,
              # one of a few choices, and a tab (its label, in any language): short
              WEIGHT_SCALE: "name", IMAGE_FORMAT: "name", EXP_TIED_SOURCE: "name",
              EXP_RAW_SOURCE: "name", EXP_ROPE_SOURCE: "name", TOY_TASK: "name",
              LENS_COLOUR: "name", LENS_KIND: "name", TR_PAIR: "name", TR_WHERE: "name",
              GEN_SAMPLING: "name", HS_COLUMN: "name", AT_CORPUS: "name",
              AT_X: "name", AT_Y: "name", AT_METHOD: "name", AT_COLOUR: "name",
              AT_HEADS_COLOUR: "name",
              PT_VIEW: "tab", RD_VIEW: "tab", TR_VIEW: "tab", MH_SECTION: "tab",
              EXPERIMENT: "tab"}
# a pick a link carries as the page's own name for its value when the page keeps one: the Head
# atlas's corpus of the learner's texts as "user:<hash>" (the texts stay on the server, in
# attnviz.app.atlas.atlas_view's store; a link never carries them). {pick: (the name's prefix,
# where read_once puts a link's name for the page, where the page keeps the current one)}
LINK_STAND_INS = {AT_CORPUS: ("user:", AT_CORPUS_ASKED, AT_CORPUS_NAMED)}
# a pick a link carries only once the learner chose it (until then the page follows the input),
# with the key saying so: reading it from a link marks it chosen
LINK_CHOSEN = {WEIGHT_SCALE: WEIGHT_SCALE_CHOSEN}
# the widgets beside a key that a link carries, by suffix, with their default (a table's
# show/hide toggle: step_table_scores_shown=1)
LINK_SUFFIXES = {SHOWN: False}

# the bounds of a page's pick a link may carry, where "at least 0" is not enough (a value
# beyond is moved inside, with a notice); Generate's are attnviz.app.generate.generate_state's
LINK_BOUNDS = {FL_THRESHOLD: (0.0, 1.0)}


def link_default(name: str) -> tuple[bool, object]:
    """Whether a link may carry `name` as a page's pick, and its default: LINK_DEFAULTS, or a
    known key's LINK_SUFFIXES widget."""
    if name in LINK_DEFAULTS:
        return True, LINK_DEFAULTS[name]
    for suffix, default in LINK_SUFFIXES.items():
        if name.endswith(suffix.suffix) and known(name):
            return True, default
    return False, None


def known(key: str) -> bool:
    """Whether `key` is declared here: a plain key, a family's, or a known key and a suffix."""
    found = REGISTRY.get(key)
    if found is not None and found.kind == "key":
        return True
    if any(d.kind == "family" and key.startswith(d.name) for d in REGISTRY.values()):
        return True
    return any(d.kind == "suffix" and key.endswith(d.name) and known(key[:-len(d.name)])
               for d in REGISTRY.values())


def _check() -> None:
    """A family or suffix may not make a key another declaration makes."""
    plain = [d.name for d in REGISTRY.values() if d.kind == "key"]
    prefixes = [d.name for d in REGISTRY.values() if d.kind == "family"]
    suffixes = [d.name for d in REGISTRY.values() if d.kind == "suffix"]
    for p in prefixes:
        for other in prefixes + plain:
            if other != p and other.startswith(p):
                raise ValueError(f"family {p!r} could make {other!r}")
    for s in suffixes:
        for base in plain:
            if base + s in plain:
                raise ValueError(f"suffix {s!r} on {base!r} makes {base + s!r}")
            if any((base + s).startswith(p) for p in prefixes):
                raise ValueError(f"suffix {s!r} on {base!r} makes a family's key")


_check()
