"""One switch's forwarding state: the pipeline config the controller pushed, its tables, counters,
register and traffic manager. The dataplane and the P4Runtime server share one ``Device``."""

from __future__ import annotations

import json
import threading

from finsy.proto import p4i, p4r

from mlfc import contract, pipeline_sizes
from mlfc.refswitch import p4info as p4info_mod
from mlfc.refswitch.errors import Code, P4RuntimeError, invalid
from mlfc.refswitch.pipeline import RandomSource, default_rng
from mlfc.refswitch.state import SwitchState
from mlfc.refswitch.tables import Tables
from mlfc.refswitch.tm import TrafficManager

NO_PIPELINE = "No forwarding pipeline config set for this device"  # PI's wording (finsy matches on it)
_Action = p4r.SetForwardingPipelineConfigRequest


def check_config(config: p4r.ForwardingPipelineConfig) -> p4info_mod.P4InfoIndex:
    """Accept our committed artifacts only, at the table sizes a deployment compiled in: the P4Info must be
    the committed one (by content) but for table sizes, and describe the model's program; a non-empty
    device config must be the committed BMv2 JSON but for the same tables' ``max_size``."""
    committed = p4info_mod.committed_p4info()
    if committed is not None and pipeline_sizes.resize_p4info(config.p4info, table_sizes(committed)) != committed:
        raise invalid(
            f"P4Info differs from the committed {p4info_mod.COMMITTED_P4INFO.name} in more than table sizes: "
            "this switch runs mlfc.p4 only"
        )
    index = p4info_mod.index_p4info(config.p4info)  # checks each size against the tested maximum
    committed_json = p4info_mod.committed_device_config()
    if config.p4_device_config and committed_json is not None:
        try:
            pushed = json.loads(config.p4_device_config)
            committed_doc = json.loads(committed_json)
            at_committed_sizes = pipeline_sizes.resize_bmv2_json(pushed, pipeline_sizes.bmv2_json_sizes(committed_doc))
            same = at_committed_sizes == committed_doc
        except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError):
            same = False
        if not same:
            raise invalid(f"device config is not the committed {p4info_mod.COMMITTED_DEVICE_CONFIG.name}")
        json_sizes, sizes = pipeline_sizes.bmv2_json_sizes(pushed), table_sizes(config.p4info)
        differ = {t: (json_sizes[t], sizes.get(t)) for t in json_sizes if json_sizes[t] != sizes.get(t)}
        if differ:
            raise invalid(f"device config and P4Info disagree on table sizes (JSON, P4Info): {differ}")
    return index


def table_sizes(info: p4i.P4Info) -> dict[str, int]:
    """The contract tables' sizes in ``info``."""
    return {t.preamble.name: t.size for t in info.tables if t.preamble.name in contract.TABLES}


class Device:
    def __init__(self, device_id: int, tm: TrafficManager, rng: RandomSource | None = None) -> None:
        self.device_id = device_id
        self.tm = tm
        self.rng = rng or default_rng()
        self.lock = threading.RLock()  # P4Runtime writes and pipeline changes
        self.index: p4info_mod.P4InfoIndex | None = None
        self.config: p4r.ForwardingPipelineConfig | None = None
        self._saved: tuple[p4r.ForwardingPipelineConfig, p4info_mod.P4InfoIndex] | None = None
        self.tables = Tables()
        self.state = SwitchState()

    @property
    def configured(self) -> bool:
        return self.config is not None

    def require_pipeline(self) -> p4info_mod.P4InfoIndex:
        if self.index is None:
            raise P4RuntimeError(Code.FAILED_PRECONDITION, NO_PIPELINE)
        return self.index

    def set_pipeline(self, action: int, config: p4r.ForwardingPipelineConfig) -> None:
        with self.lock:
            if action == _Action.UNSPECIFIED:
                raise invalid("Invalid SetForwardingPipeline action")
            if action == _Action.COMMIT:
                if self._saved is None:
                    raise P4RuntimeError(Code.FAILED_PRECONDITION, "COMMIT without a saved config (VERIFY_AND_SAVE)")
                self._activate(*self._saved, keep_state=False)
                self._saved = None
                return
            index = check_config(config)
            if action == _Action.VERIFY:
                return
            if action == _Action.VERIFY_AND_SAVE:
                self._saved = (config, index)
            elif action == _Action.VERIFY_AND_COMMIT:
                self._activate(config, index, keep_state=False)
            elif action == _Action.RECONCILE_AND_COMMIT:
                # Same program by construction (check_config), so the forwarding state is preserved.
                self._activate(config, index, keep_state=self.configured)
            else:
                raise invalid(f"Invalid SetForwardingPipeline action {action}")

    def _activate(self, config: p4r.ForwardingPipelineConfig, index: p4info_mod.P4InfoIndex, keep_state: bool) -> None:
        stored = p4r.ForwardingPipelineConfig()
        stored.CopyFrom(config)
        sizes = table_sizes(index.p4info)
        if not keep_state or sizes != self.tables.sizes:
            # As BMv2: a new pipeline starts with empty tables, initial defaults, zero counters/registers.
            self.tables = Tables(sizes=sizes)
            self.state = SwitchState()
        self.index = index
        self.config = stored

    def get_pipeline(self, response_type: int) -> p4r.ForwardingPipelineConfig:
        out = p4r.ForwardingPipelineConfig()
        if self.config is None:
            raise P4RuntimeError(Code.FAILED_PRECONDITION, NO_PIPELINE)
        req = p4r.GetForwardingPipelineConfigRequest
        if response_type in (req.ALL, req.P4INFO_AND_COOKIE):
            out.p4info.CopyFrom(self.config.p4info)
        if response_type in (req.ALL, req.DEVICE_CONFIG_AND_COOKIE):
            out.p4_device_config = self.config.p4_device_config
        if response_type not in (req.ALL, req.P4INFO_AND_COOKIE, req.DEVICE_CONFIG_AND_COOKIE, req.COOKIE_ONLY):
            raise invalid("Invalid response_type in GetForwardingPipelineConfigRequest")
        if self.config.HasField("cookie"):
            out.cookie.CopyFrom(self.config.cookie)
        return out
