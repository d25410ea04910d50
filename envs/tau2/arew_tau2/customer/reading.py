"""How tau2's offline customer reads an agent message: what it asks of the phone (the rules below), which
phone tools it asks for (:func:`requested_tools`, the critiques' view of a message), and whether it says the
issue is fixed. The customer (:mod:`arew_tau2.customer.offline`) carries out what is read here.

The message is lower-cased; "Wi-Fi", "flight mode", "re-seat"... normalised; chat spellings read as the
words they stand for (:data:`_CHAT`: "u", "plz", "wanna"); a tool's name ("toggle_roaming") read as its
feature's name, its verb asking nothing; one misspelled word read as the word it misspells (:data:`_SPELLED`:
"trun", "restrat", "airplain", "reebot", "swtihc"; the first letter kept, real words near them left alone);
"don't forget to", "why don't you" and "get ... back on" read as the requests they are; a run of one-word
sentences ("Turn. Off. Roaming.") read as one; the first :data:`MAX_MESSAGE_CHARS` characters read
(:func:`normalise`).

What the message asks of the phone (:func:`requests`). Parenthesised text is skipped (examples
are not requests). The message is cut into sentences (at . ! ? ; and every line end; a bullet
begins a line) and clauses (at "but", "so", "because", "otherwise", ", then", ", and" before a
new subject...; a leading "if/unless/before/until/once/after ..." clause is cut from the clause
it conditions). Phone features are found by keyword patterns (:data:`FEATURES`: airplane mode,
mobile data, roaming, data saver, Wi-Fi, Wi-Fi calling, network mode, APN, VPN, SIM, reboot, app
permissions, MMS, speed test, status bar, network status, installed apps, payment); a feature's
name that names a part of it the phone's tools do not touch (:data:`_PART`: "the roaming
firmware", "the SIM card's battery") is no mention. A mention is asked for by the nearest verb
before it in its clause (:data:`_CUES`): an action (toggle, turn, switch, enable, reset, grant,
allow, set, put, use...) or a reading (check, look, tell, run, try...; "is/are/does/did/has..."
only in a question or at the head of the clause; "what/which" only in a question, at the head or
after a verb of knowing ("let me know what..."); "if/whether" only after another word, and not
in "as if / even if"). "reboot"/"restart" and "pay" are their own verb, at the head of the
clause or after "please", "to", "you", "should", "can", "and", "then"... ("a restart might
help" and a stray "reboot" in a list ask nothing). A verb-ing asks only where something asks for
it (:data:`_SUGGESTED`: "try", "how about", "would you mind", "I'd suggest", "what I'd suggest
is", "a good next step would be", "worth"; and "a quick reboot" after the same frames) or when it
is the subject of a recommendation (:data:`_WORTH`: "switching to 4G might be worth a shot");
elsewhere it is a subject, a report or an example, and what it governs asks nothing, in a
question too ("toggling airplane mode is the magic cure, right?"). What is not asked for:

- a statement: a mention with no verb before it ("Airplane mode is on."), or after a verb
  whose subject is the agent ("I checked your line", "I'll enable roaming", "let me look",
  "we would reset"; "I'd like you to...", "I recommend...", "I think ..." still ask) or someone
  else, a page or the usual practice ("another customer fixed it by...", "our help page says
  to...", "the usual fixes are...", "people enable...", "the tool toggle_airplane_mode..."), any
  noun phrase before a reporting verb (:data:`_REPORTED`: "our troubleshooting script says
  to...", "my supervisor recommends...", "another agent told you to...", but not "check what the
  status bar says"), "you" and a verb in a time past ("you reset the APN yesterday"), an unknown
  verb after "please" or "could you" ("please defragment your SIM card", "could you clear the
  cache on your SIM card?": an action the phone does not have), "do not ..." (no reading either),
  "it looks like", "I see", "is set to";
- a negated verb ("don't", "never", "no need to", "you don't need to", "not" up to three
  words before it, "not the X"), a clause that says it is not needed ("not necessary",
  "unnecessary", "no need"), and "leave / keep X alone / as it is / unchanged", "don't touch
  X": that feature's action is cancelled for the whole message;
- a deferral or a hypothesis in the clause ("later", "not yet", "at some point", "hold off",
  "if needed", "otherwise", "might need to", "may have to", "would cut / break / disconnect...";
  after "you" a modal suggests: "you could turn off..." asks), a clause "but not yet" / "but
  later" after it, an "if/unless/before/until ..." clause (but "if you could ..." is a polite
  request), and the clause after "if that doesn't work / if it still fails";
- a keyword salad: a clause naming 4 or more features with fewer than half as many
  function words and commas (``the, your, to, and, on, please, you...``).

A mention with no verb before it still asks when "needs to / has to / must be turned on /
enabled / reset..." follows it in its clause (an action), when its sentence is a question (a
reading), or when its clause says "please" or is a line of a list that a line ending in ":"
asks for ("Here's what I need:") and its sentence has no verb at all (a reading; an action when
it says on/off: "Airplane mode off, please"; a reading whatever it says when the list's line
asks to check or confirm). "Go to / open X and choose / select / tap / turn ..." asks for X's
action; "once / after / when you've turned X off, <a request>" asks for X's action before the
request. A pronoun after an action verb ("turn it off", "reset them", "put it back") stands for
the nearest feature with an action mentioned before it in the same or the previous sentence;
"do that / do it / do so / go ahead" asks for the actions of the features of the nearest
clause before it that names any (so "Roaming has to be enabled on your phone. Please do
that." and "Airplane mode is on; please turn it off." act). A yes/no question ("did you turn
off...?", "have you tried restarting?") asks for a reading, not an action; a polite question
("do you think you could...", "is it possible to...", "are you able to...") asks for the
action. Features are taken in the order of their first request, one intent per feature (an
action if any request is one, unless the message cancels that feature's action).
:func:`requested_tools` names the phone tools a message asks for, by the same reading: the
environment credits a message only with customer calls it asked for, whichever customer made
them (:mod:`arew_tau2.critiques`).
"""

from __future__ import annotations

import bisect
import functools
import logging
import re
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 4000


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text or "") if s.strip()]


@dataclass(frozen=True)
class Feature:
    name: str
    pattern: re.Pattern
    write: str | None  # the write tool (or a chooser's key), None for read-only features
    read: str | None  # the read tool


def _feature(name: str, patterns: str, write: str | None, read: str | None) -> Feature:
    return Feature(name, re.compile(patterns), write, read)


# longest match wins where mentions overlap ("data roaming" over "data", "wifi calling" over "wifi")
FEATURES = (
    _feature("wifi_calling", r"wifi[ -]?call\w*|vowifi|calls? over wifi|calling over wifi", "toggle_wifi_calling", "check_wifi_calling_status"),
    _feature("data_saver", r"data[ -]?saver(?: mode)?|data restrictions?|restrict\w* (?:\w+ )?data|data[ -]limiting|low data mode", "toggle_data_saver_mode", "check_data_restriction_status"),
    _feature("roaming", r"(?:data )?roaming", "toggle_roaming", "check_network_status"),
    _feature("airplane", r"airplane(?: mode)?", "toggle_airplane_mode", "check_network_status"),
    _feature(
        "network_mode",
        r"network (?:mode|type|preference|generation|setting)s?(?: preference)?|preferred network(?: type| mode)?"
        r"|\b[2345]g(?:[ /_-]+(?:[2345]g|lte))*(?:[ _-]+(?:only|preferred))?\b|\blte\b",
        "set_network_mode_preference",
        "check_network_mode_preference",
    ),
    _feature("apn", r"\bapns?\b(?: settings?)?|access point(?: names?)?(?: settings?)?|\bmmsc\b", "apn", "check_apn_settings"),
    _feature("vpn", r"\bvpn\b(?: connection)?|virtual private network", "vpn", "check_vpn_status"),
    _feature("sim", r"\bsim(?: card)?s?\b|\bsim tray\b", "reseat_sim_card", "check_sim_status"),
    _feature(
        "reboot",
        r"\breboot(?:ing|ed)?\b|\brestart(?:ing|ed)?\b|\bpower[ -]?cycl\w*"
        r"|\b(?:turn|switch|power)\w* (?:your |the )?(?:phone |device |handset |cell ?phone |smartphone |mobile |it )?off and (?:then )?(?:back )?on",
        "reboot_device",
        None,
    ),
    _feature(
        "permission",
        r"\bpermissions?\b|\b(?:to )?access\b(?! point)(?: to\b)?",
        "grant_app_permission",
        "check_app_permissions",
    ),
    _feature("installed_apps", r"installed apps?|apps? (?:are )?installed|(?:what|which) apps", None, "check_installed_apps"),
    _feature("app_status", r"app(?:'s)? (?:status|details|info\w*)", None, "check_app_status"),
    _feature(
        "mms",
        r"\bmms\b|picture messag\w*|multimedia messag\w*|photo messag\w*|send(?:ing)? (?:a |an )?(?:photo|picture|image)",
        None,
        "can_send_mms",
    ),
    _feature("speed", r"speed ?test|internet speed|\bspeed\b|\bhow (?:fast|slow|quick)\b|\bbrows\w*|load (?:a )?(?:web ?page|website)", None, "run_speed_test"),
    _feature("status_bar", r"status bar|top of (?:your|the) screen|\bicons?\b|signal (?:bars?|icons?|indicators?)", None, "check_status_bar"),
    _feature(
        "network_status",
        r"network status|connection status|\bsignal\b|\bservice\b|cellular (?:connection|network)"
        r"|\bconnected\b(?! (?:to|via|over|through) (?:a |an |the |your |any )?(?:vpn|wifi|wireless|virtual|hotspot))",
        None,
        "check_network_status",
    ),
    _feature("payment", r"payment(?: requests?)?s?|\bpay\b|\bbills?\b|\binvoice\b", "make_payment", "check_payment_request"),
    _feature("wifi", r"\bwifi\b|\bwireless\b", "toggle_wifi", "check_wifi_status"),
    _feature("mobile_data", r"(?:mobile|cellular) data(?: connection)?|data connection|mobile internet|\bdata\b", "toggle_data", "check_network_status"),
    # amounts and plans of data: swallowed so that "2 GB of data" is not mobile data
    _feature(
        "data_amount",
        r"(?:\d+(?:\.\d+)? ?)?(?:gb|gigabytes?|mb|megabytes?) of (?:mobile )?data|(?:more|extra|additional|some) data"
        r"|data (?:plans?|usage|limits?|allowance|balance|caps?|refuel\w*|top[ -]?ups?|packages?)|refuel\w* (?:\w+ ){0,3}data",
        None,
        None,
    ),
)

_WRITE_CUE = (
    r"toggl\w*|turn(?:ing)?|switch(?:ing)?|flip(?:ping)?|enabl(?:e|ing)|disabl(?:e|ing)|activat(?:e|ing)|deactivat(?:e|ing)"
    r"|reset(?:ting)?|restor(?:e|ing)|revert(?:ing)?|reseat(?:ing)?|remov(?:e|ing)|reinsert(?:ing)?|insert(?:ing)?|take|taking|pull|pop"
    r"|grant(?:ing)?|give|giving|allow(?:ing)?|set(?:ting)?|chang(?:e|ing)|connect(?:ing)?|disconnect(?:ing)?|pay(?:ing)?"
    r"|make|making|accept|approve|configure|updat(?:e|ing)|select|choose|pick|tap|press|hit|click|put|use|using"
    r"|reboot(?:ing)?|restart(?:ing)?|simulat(?:e|ing)"
)
_READ_CUE = (
    r"check\w*|look(?:ing)?|see|seeing|tell|what|which|whether|if|confirm|verify|show|shows|read|reads|run|running|test|testing"
    r"|try|trying|report|say|says|display\w*|describe"
)
_AUX_CUE = r"is|are|was|were|am|do|does|did|has|have|had|can|could"
_NAV_CUE = r"go (?:to|into)|open|navigate(?: to)?|head (?:over )?to|find"
_CUES = re.compile(rf"\b(?:(?P<nav>{_NAV_CUE})|(?P<write>{_WRITE_CUE})|(?P<aux>{_AUX_CUE})|(?P<read>{_READ_CUE}))\b")

# what may stand before the head of a clause ("and then please, ...")
_LEAD = re.compile(
    r"(?:[\s,:-]|\b(?:and|so|but|also|then|now|ok|okay|alright|great|well|first|firstly|second|secondly|next|finally|lastly"
    r"|just|perfect|thanks|thank you|sure|right|good|please|maybe|perhaps|yeah|yes|oh|no|hmm|hey)\b)*"
)
_SENTENCE_END = re.compile(r"[.!?;]*\n[\n.!?;]*|[.!?;]+(?=\s|$)")
_CLAUSE_BREAK = re.compile(
    r",?\s+(?=(?:but|because|although|though|whereas|otherwise|unless)\b)"
    r"|(?<!\bdo),?\s+(?=so\b(?! that))"
    r"|,\s*(?=(?:and\s+)?then\b)|\s+(?=and then\b)"
    r"|,\s*(?=and\s+(?:i|we|you|it|that|this|they|there|if)\b)"
    r"|,\s*(?=(?:which|as|since|if|unless|before|until|in case)\b)"
    r"|\s+-+\s+"
)
_SUBORDINATE = re.compile(r"(?:even if|if|unless|in case|before|until|whether or not|when|once|after|as soon as)\b")
_CONDITIONS = ("even if", "if", "unless", "in case", "before", "until", "whether or not")
_SUBORDINATE_END = re.compile(r",|\bthen\b|\bplease\b")
_SEQUENCES = ("when", "once", "after", "as soon as")
# what has the customer do a step before the next: "once you've turned airplane mode off, (please restart)"
_DONE = re.compile(
    r"\byou(?:'ve| have)\s+(?:just\s+|already\s+|finished\s+)?(?P<verb>turned|switched|toggled|flipped|enabled|disabled|activated"
    r"|deactivated|reset|restored|reverted|reseated|removed|reinserted|inserted|granted|allowed|set|changed|connected|disconnected"
    r"|paid|updated|selected|rebooted|restarted|power[ -]?cycled)\b"
)
# a line ending in ":" that asks for what its list names ("Here's what I need:", "Please do the following:")
_LIST_ASKS = re.compile(r"\b(?:please|need|want|steps?|do|following|try|make sure|instructions?|checklist|what to do)\b")
_LIST_READS = re.compile(r"\b(?:check|confirm|verify|tell me|let me know|read)\b")
_AUX_HEAD = re.compile(
    r"(?:is|are|was|were|am|do|does|did|has|have|had|isn't|aren't|wasn't|don't|doesn't|didn't|haven't|hasn't)\b"
)
# a question that asks for an action, not a yes/no reading ("do you think you could...", "is it possible to...")
_POLITE_ASK = re.compile(
    r"(?:do|would) you (?:think|reckon|suppose|mind)\b|(?:is|was) it (?:possible|ok|okay|alright|all right)\b|are you (?:able|willing) to\b"
)
# a condition that is a polite request ("if you could turn off the VPN, that would be great")
_POLITE_IF = re.compile(r"if you (?:could|would|'d)\s+(?!not\b)")

# not asked for
_NEGATION = re.compile(
    r"(?:\b(?:never|not|no|avoid|without|instead of|rather than|neither|nor)|n't)\s+(?:(?!(?:and|then|please|just|so)\b)[\w']+\s+){0,3}$"
)
_NOT_THE = re.compile(
    r"\b(?:not|except|besides|rather than|instead of|other than|apart from)\s+(?:the |your |my |any )?$"
)
_NOT_NEEDED = re.compile(
    r"(?:\bnot|n't|\bnever)\s+(?:[\w']+\s+){0,2}?(?:necessary|needed|required|helpful|useful|recommended|advisable|a good idea|worth it)\b"
    r"|\b(?:unnecessary|pointless|useless)\b|\bno (?:need|point|reason)\b|\bneedn't\b|\bno longer (?:necessary|needed|required)\b"
)
_DEFER = re.compile(
    r"\blater\b|\bnot (?:just |right )?(?:yet|now|today)\b|\bat some point\b|\beventually\b|\bin the future\b|\bnext time\b"
    r"|\bhold off\b|\bfor later\b|\bif (?:needed|necessary|required|need be)\b|\bonly if\b|\bas a last resort\b|\bin a (?:bit|while)\b"
    r"|\botherwise\b|\bfailing that\b|\bif all else fails\b"
)
_HYPOTHESIS = re.compile(
    r"\b(?:might|may|could) (?:\w+ )?(?:need|have) to\b"
    r"|\b(?<!you )(?:would|will|could|might|may|can)\s+(?:also |only |just |even )?(?:cut|break|disconnect|disable|stop|lose|kill|drop|block|erase"
    r"|wipe|delete|remove|interrupt|mess up|turn off|undo|make things worse|cause)\b|\bin theory\b|\bhypothetically\b"
)
_FAILURE = re.compile(
    r"\b(?:that|this|it|the (?:above|problem|issue)|nothing|none of (?:that|this|these)|the previous step)\b[^,]*?"
    r"\b(?:doesn't|does not|didn't|did not|won't|will not|fails?|failed|still|persists?|not (?:work|fixed|help|resolve))\b|\bif not\b"
)
_BARE_DEFERRAL = re.compile(
    r"(?:(?:but|and|just|maybe|perhaps|please)\s+)*(?:not\s+(?:just\s+|right\s+)?(?:yet|now|today)|later(?: on)?|another time)\W*"
)
_KEEP = re.compile(
    r"\b(?:leave|keep)\s+(?P<obj>(?:[\w']+\s+){0,5}?)(?:alone|as (?:it is|they are|is)|unchanged|untouched|the way (?:it is|they are)"
    r"|where (?:it is|they are))\b"
    r"|(?:\b(?:never|not|no need to)|n't)\s+(?:\w+\s+)?(?:touch|mess with|tamper with|fiddle with|play with|modify)\b(?P<obj2>[^.!?;,]{0,60})"
)
# statements and questions
# what others did or what a page says ("another customer fixed it by...", "our help page says to...", "the usual fixes are...",
# "the knowledge base article lists...", "the previous agent asked you to...")
_REPORT = re.compile(
    r"\b(?:another|other|some|most|many) (?:customers?|users?|people|callers?)\b|\bpeople\b|\b(?:they|he|she)\b"
    r"|\b(?:colleague|technician|coworker|co-worker|friend|someone|somebody|everyone|everybody)s?\b"
    r"|\b(?:help|support|faq) (?:page|article|site|center|centre)s?\b|\b(?:manual|guide|documentation|docs)\b"
    r"|\busual(?:ly)? (?:fix|step|solution|remed)\w*|\bin some cases\b|\bfor reference\b|\bthe tool\b"
    r"|\bknowledge[- ]?base\b|\barticles?\b|\b(?:previous|last|other|earlier) (?:agent|rep|representative)s?\b"
)
# a source that reports: a noun phrase before a reporting verb ("our troubleshooting script says to...", "my supervisor
# usually recommends...", "another agent told you..."), not a question's ("check what the status bar says")
_REPORTED = re.compile(
    r"\b(?:the|a|an|my|our|your|his|her|their|its|another|this|that|one|every|each|some)\s+(?:(?!(?:and|or|then|please|to|so|but|if)\b)[\w'-]+\s+){1,4}?"
    r"(?:\w+ly\s+|always\s+|often\s+|also\s+|just\s+|even\s+)?(?:says?|said|tells|told|asks|asked|recommends?|recommended|suggests?"
    r"|suggested|advises?|advised|mentions|mentioned|lists|listed|notes|noted|writes|wrote|states|stated|explains|explained"
    r"|instructs|instructed|claims|claimed)\b(?:(?!\bplease\b)[^,;:])*$"
)
_EMBEDDED = re.compile(r"\b(?:what|whether|if|how|which|see)\s+$")
# a time past after "you" and its verb, in the verb's stretch of the clause: "you reset the APN settings yesterday" is a report
_PAST_TIME = re.compile(
    r"\b(?:yesterday|earlier|previously|last (?:week|night|time|month|year)|ago|this morning|the other day)\b"
)
_YOU_BEFORE = re.compile(r"\byou\s+(?:\w+ly\s+|already\s+|just\s+)?$")
# the agent's own hypothetical: "(if ...,) we would reset the APN"
_WE_WOULD = re.compile(r"\bwe\s+(?:would|will|could|might|can)\s+(?:also\s+|then\s+|just\s+)?$")
_AGENT = re.compile(r"\b(?:i|i'll|i've|i'm|i'd|we've|we'll|we're|we'd|let me(?! know))\s+")
_AGENT_GAP = re.compile(r"(?:[\w']+\s+){0,3}")
# what, between the agent and the verb, makes it a request or a hedge ("I'd like you to...", "I think switching...")
_ASKS = re.compile(r"\b(?:you|your|we|recommend|suggest|advise|want|need|like|ask|asking|please|would|think|guess|believe|reckon|suppose|feel|wonder\w*|hop\w*)\b")
# what asks for the action a verb-ing (or "a reboot") names; elsewhere a verb-ing is a subject, a report or an example
# ("toggling airplane mode is the magic cure", "as if resetting the APN ever helped", "thanks for checking")
_SUGGESTED = re.compile(
    r"(?:\b(?:try|how about|what about|mind|suggest|recommend|advise|propose|consider|worth|keep|start by|begin by|start with"
    r"|begin with|go ahead with|proceed with)"
    r"|\b(?:what (?:i|we)(?:'d| would)? (?:suggest|recommend|advise|propose)|what (?:i|we)(?:'d| would)? like you to do"
    r"|what (?:i|we) (?:want|need) you to do|(?:my|our) (?:suggestion|recommendation|advice|proposal)"
    r"|(?:the|a|your|one|our|another) (?:(?:good|best|next|first|quick|simple|easiest|obvious|logical|safest) )*(?:step|thing to (?:do|try)|fix"
    r"|move|option|idea|bet))(?: here| now| then)?\s+(?:is|'s|would be|will be|should be|might be|could be)(?:\s+to)?"
    r"(?:\s+(?:a|an)(?:\s+(?:quick|simple|full|fresh|soft|hard|proper))?)?)"
    r"\s+(?:just |simply |also |quickly |maybe |perhaps )?$"
)
# a verb-ing as the subject of a recommendation: "switching to 4G might be worth a shot"
_WORTH = re.compile(
    r"[^,;]*?\b(?:is|'s|might be|may be|could be|would be|should be|will be)\s+(?:\w+\s+)?(?:worth (?:a (?:shot|try|go)|trying|doing|it)"
    r"|a good idea|your best bet|the way to go|the (?:next|best) (?:step|thing to do))\b"
)
_WANT_TO_KNOW = re.compile(r"\b(?:know|tell (?:me|us)|wonder\w*|find out|curious|sure|ask)\s+$")
_SEE_STATEMENT = re.compile(r"\b(?:i|we|as you can|you can|you'll|you will)\s+$")
_LOOKS_LIKE = re.compile(r"\s+(?:like|as if|as though|good|fine|okay|ok)\b")
_QUESTION_BEFORE = re.compile(r"\b(?:do|did|does|are|were|have|has)\s+(?:you|it|i)\s+$")
_BE_BEFORE = re.compile(r"\b(?:is|are|be|been|was|were|it's|currently)\s+$")
# what may stand right before "restart" / "pay" used as a request (else it is a noun, a report or a stray keyword)
_VERB_BEFORE = re.compile(
    r"(?:\b(?:please|to|you|should|must|can|could|would|will|let's|and|then|also|now|just|first|next|finally|quickly|simply"
    r"|try|maybe|recommend|suggest|go ahead and|(?<!not )worth)|[,:]|(?:^|\s)[a-z1-9]\))(?:\s+\w+ly)?\s+$"
)
_PASSIVE = re.compile(
    r"\s*(?P<gap>(?:[\w']+\s+){0,3}?)(?:(?:(?:needs?|has|have|ought) to|must)\s+be\s+(?:turned|switched|set|changed|reset|enabled|disabled"
    r"|toggled|restored|reseated|reinserted|granted|connected|disconnected|activated|deactivated|on|off)"
    r"|should\s+be\s+(?:turned|switched|set|changed|reset|toggled|restored|reseated|reinserted|granted))\b"
)
_AND_ACT = re.compile(
    r"[^,]*?\band\s+(?:then\s+)?(?:[\w']+\s+)?(?=(?:choose|select|tap|press|pick|hit|click|set|reset|change|switch|turn|toggle|enable|disable|restore)\b)"
)
_PRONOUN = re.compile(r"\b(?:it|that|this|them|those|these)\b")
_PLURAL = re.compile(r"\b(?:them|those|these)\b")
_DO_THAT = re.compile(
    r"\b(?:do|doing)\s+(?:it|that|this|so|the same|those|these|them)\b|\bgo ahead\b(?!\s+and\s+(?!do\b)\w)"
)
_PLEASE = re.compile(r"\bplease\b")
# a word after "please" / "could you" that is no cue, no article and no feature: the verb of an action the phone does not have
_UNKNOWN_VERB = re.compile(
    r"\b(?:please|(?:can|could|would|will) you(?: please| kindly| just)?)\s+"
    r"(?!(?:the|your|my|a|an|just|also|now|then|kindly|do|try|again|first|next)\b)(?P<verb>[a-z]{3,})\b(?=\s+(?:the|your|my|a|an|all)\b)"
)
_DIRECTION_CUT = re.compile(r",|\b(?:and|but|if|then|because|so|when|while|unless)\b")
PARENTHESES = re.compile(r"\([^()]*\)")
# the words and marks that make a list of features a sentence (a clause of 4+ features with fewer than half as many is a keyword salad)
_STRUCTURE = re.compile(
    r",|\b(?:the|a|an|your|my|to|and|or|of|on|off|in|for|with|is|are|it|please|you|me|if|what|then|at|from|that|this|can|could|would)\b"
)
SALAD_MENTIONS = 4
_ON = re.compile(r"\b(?:on|enable|enabling|enabled|activate|activating|connect|connecting)\b")
_OFF = re.compile(r"\b(?:off|disable|disabling|disabled|deactivate|deactivating|disconnect\w*)\b")
_NOT_DIRECTION = re.compile(r"\bon (?:your|the|my|its|this|that)\b")

# toggles whose state can be read before a directed request ("turn X off")
TOGGLE_STATE = {
    "toggle_airplane_mode": ("check_network_status", re.compile(r"airplane mode:\s*(on|off)")),
    "toggle_data": ("check_network_status", re.compile(r"mobile data enabled:\s*(yes|no)")),
    "toggle_roaming": ("check_network_status", re.compile(r"data roaming enabled:\s*(yes|no)")),
    "toggle_wifi": ("check_wifi_status", re.compile(r"wi-fi is (?:currently )?(?:turned )?(on|off)")),
    "toggle_wifi_calling": ("check_wifi_calling_status", re.compile(r"wi-fi calling is (?:currently )?(?:turned )?(on|off)")),
    "toggle_data_saver_mode": ("check_data_restriction_status", re.compile(r"data saver mode is (?:currently )?(?:turned )?(on|off)")),
}

_FIX_CLAIM = re.compile(
    r"\b(?:fixed|resolved|solved|sorted)\b|should (?:now |be )?(?:work|working|fine|good|back|resolved|fixed)"
    r"|working (?:now|again)|\bworks? (?:now|again)\b|(?:see|check|test) (?:if|whether) (?:it|that|the issue|the problem|everything|things)|(?:is|does) it work|try (?:it |that )?(?:again|now)|test (?:it|that|again)"
    r"|(?:can|could) you (?:now )?(?:try|test)|see if (?:it|that|the issue|the problem|everything)|check if (?:it|that|the issue|the problem|everything)"
)


# the things a feature's name may modify that are no feature ("the roaming firmware", "the SIM card's battery"):
# the mention names that thing, not the feature
_PART = re.compile(
    r"(?:'s)?\s+(?:firmware|cache|battery|antenna|chip|software|drivers?|modem|bootloader|hardware|kernel"
    r"|partition|sensor)\b"
)


@dataclass(frozen=True)
class _Mention:
    feature: Feature
    start: int
    end: int


def _mentions(text: str) -> list[_Mention]:
    found = [
        _Mention(f, m.start(), m.end())
        for f in FEATURES
        for m in f.pattern.finditer(text)
        if m.end() > m.start() and not _PART.match(text, m.end())
    ]
    found.sort(key=lambda m: (m.start - m.end, m.start))
    taken: list[_Mention] = []
    for mention in found:
        if all(mention.end <= t.start or mention.start >= t.end for t in taken):
            taken.append(mention)
    return sorted(taken, key=lambda m: m.start)


@dataclass
class _Clause:
    start: int
    end: int
    sentence: int
    question: bool  # its sentence ends with "?"
    head: int = 0  # where its words begin, after leading connectors ("and then please ...")
    conditional: bool = False  # an if/unless/before/until ... clause
    deferred: bool = False  # later, not yet, might need to, would cut ...
    not_needed: bool = False  # not necessary, no need ...
    aux_head: bool = False  # "is/are/do/did/have ..." heads it: a yes/no question
    listed: str = ""  # an item of a list a line asks for: "ask" ("Here's what I need:"), "read" ("Please check the following:")
    sequenced: bool = False  # "once / after / when / as soon as ..." before what it sequences


@dataclass(frozen=True)
class _Cue:
    start: int
    end: int
    kind: str  # "write", "read" or "nav", as it counts in its clause
    word: str


def _clause(text: str, start: int, end: int, sentence: int, question: bool) -> _Clause:
    body = text[start:end]
    head = _LEAD.match(text, start, end).end()
    return _Clause(
        start,
        end,
        sentence,
        question,
        head=head,
        deferred=bool(_DEFER.search(body) or _HYPOTHESIS.search(body)),
        not_needed=bool(_NOT_NEEDED.search(body)),
        aux_head=bool(_AUX_HEAD.match(text, head, end)) and not _POLITE_ASK.match(text, head, end),
    )


def _clauses(text: str) -> list[_Clause]:
    """The message's clauses, in order (the module docstring)."""
    out: list[_Clause] = []
    start, listing = 0, ""
    ends = [*_SENTENCE_END.finditer(text), None]
    for sentence, stop in enumerate(ends):
        end = stop.start() if stop is not None else len(text)
        question = stop is not None and "?" in stop.group()
        listed, body = listing, text[start:end].rstrip()
        if body.endswith(":"):
            listing = "read" if _LIST_READS.search(body) else "ask" if _LIST_ASKS.search(body) else ""
        elif stop is None or "\n" not in stop.group():
            listing = ""
        pieces, cut = [], start
        for brk in _CLAUSE_BREAK.finditer(text, start, end):
            if brk.start() > cut:
                pieces.append((cut, brk.start()))
            cut = max(cut, brk.end())
        pieces.append((cut, end))
        first = len(out)
        for a, b in pieces:
            if not text[a:b].strip():
                continue
            head = _LEAD.match(text, a, b).end()
            sub = _SUBORDINATE.match(text, head, b)
            split = _SUBORDINATE_END.search(text, sub.end(), b) if sub else None
            if sub and split:  # "if X, Y": the condition, then the clause it conditions
                condition = _clause(text, a, split.start(), sentence, question)
                condition.conditional = sub.group() in _CONDITIONS and not _POLITE_IF.match(text, head, b)
                condition.sequenced = sub.group() in _SEQUENCES
                rest = _clause(text, split.end() if split.group() == "," else split.start(), b, sentence, question)
                if condition.conditional and (_FAILURE.search(text, a, split.start()) or condition.deferred):
                    rest.deferred = True  # "if that doesn't work, restart": a fallback, not a request
                out += [condition, rest]
                continue
            clause = _clause(text, a, b, sentence, question)
            if sub:  # a trailing "..., if needed" / "..., unless ...": no request itself, and it may defer the clause before it
                clause.conditional = sub.group() in _CONDITIONS and not _POLITE_IF.match(text, head, b)
                if clause.conditional and (_FAILURE.search(text, a, b) or clause.deferred) and len(out) > first:
                    out[-1].deferred = True
            elif _BARE_DEFERRAL.fullmatch(text[head:b].strip()) and len(out) > first:
                out[-1].deferred = True  # "restart your phone later, but not yet"
            out.append(clause)
        for clause in out[first:]:
            clause.listed = listed
        start = stop.end() if stop is not None else len(text)
    return out


def _agent_speaks(before: str) -> bool:
    """The verb after ``before`` is the agent's own ("I checked", "I'll enable", "let me look", "we would reset"), or
    someone else's ("another customer fixed it by resetting", "the help page says to reboot")."""
    if _REPORT.search(before) or _WE_WOULD.search(before):
        return True
    reported = _REPORTED.search(before)
    if reported and not _EMBEDDED.search(before, 0, reported.start()):
        return True
    found = list(_AGENT.finditer(before))  # the last speaker before the verb: "I think I'll enable..." is the agent's
    gap = before[found[-1].end() :] if found else ""
    return bool(found) and bool(_AGENT_GAP.fullmatch(gap)) and not _ASKS.search(gap)


def _cue_kind(text: str, clause: _Clause, start: int, word: str, kind: str) -> str | None:
    """How a verb counts where it stands: "write", "read", "nav" or None (it asks nothing there)."""
    before = text[clause.start : start]
    at_head = start <= clause.head
    if kind == "aux":
        if word == "do" and not clause.question and re.match(r"\s+not\b", text[start + len(word) :]):
            return None  # "do not touch airplane mode"
        return "read" if at_head or clause.question else None
    if word in ("if", "whether") and (at_head or re.search(r"\b(?:as|even|only|what)\s+$", before)):
        return None  # a condition or a comparison, not "tell me if"
    if word in ("what", "which") and (re.match(r"\s*,", text[start + len(word) :]) or not (
        clause.question or (at_head and word == "what") or _WANT_TO_KNOW.search(before)
    )):
        return None  # "here's what I need", "you know what, ...", ", which makes data slow" (but "let me know what...")
    if word in ("says", "shows", "reads", "displays") and not clause.question:
        return None  # "it says airplane mode is on"
    if word == "look" and _LOOKS_LIKE.match(text, start + len(word)):
        return None
    if word in ("see", "seeing") and _SEE_STATEMENT.search(before):
        return None
    if word.endswith("ing") and not _SUGGESTED.search(before) and not _WORTH.match(text, start + len(word), clause.end):
        return None  # "Turning airplane mode on would...", "have you tried restarting", "thanks for checking"
    if _agent_speaks(before):
        return None
    return kind


def _judge_write(text: str, clause: _Clause, start: int) -> tuple[str | None, bool]:
    """(what an action verb at ``start`` asks: "write", "read" or None; whether it says to leave the feature alone)."""
    before = text[clause.start : start]
    if _NEGATION.search(before) or clause.not_needed:
        return None, True
    if clause.conditional or clause.deferred:
        return None, False
    if _YOU_BEFORE.search(before) and not clause.question and _PAST_TIME.search(re.split(r"[,;:]", text[start : clause.end])[0]):
        return None, False  # "you reset the APN settings yesterday"
    if clause.aux_head or (clause.question and _QUESTION_BEFORE.search(before)):
        return "read", False  # "did you turn it off?"
    if _BE_BEFORE.search(before) and not _SUGGESTED.search(before):
        return ("read" if clause.question else None), False  # "is it set to 4G?" / "it is set to 3G"
    return "write", False


def _judge_read(text: str, clause: _Clause, start: int) -> str | None:
    if _NEGATION.search(text[clause.start : start]) or clause.not_needed or clause.conditional or clause.deferred:
        return None
    return "read"


def _direction_window(text: str, clause: _Clause, cue_start: int, mention: _Mention, inside: list[_Mention]) -> str:
    """The words that may say on/off for ``mention``: between its verb and the verb's first object, and right after it."""
    first = next((m for m in inside if m.start >= cue_start), mention)
    later = [m.start for m in inside if m.start >= mention.end]
    end = min([clause.end, mention.end + 30, *later])
    cut = _DIRECTION_CUT.search(text, mention.end, end)
    return text[cue_start : first.start] + " " + text[mention.start : cut.start() if cut else end]


def direction(window: str) -> str | None:
    window = _NOT_DIRECTION.sub(" ", window)
    on, off = bool(_ON.search(window)), bool(_OFF.search(window))
    return "on" if on and not off else "off" if off and not on else None


_Event = tuple[int, "str | None", Feature, str, bool]  # (position, kind, feature, window, leave it alone)


class Reading:
    """One message read for requests (the module docstring)."""

    def __init__(self, text: str):
        self.text = text = PARENTHESES.sub(lambda m: " " * len(m.group()), text)
        self.clauses = _clauses(text)
        self._starts = [clause.start for clause in self.clauses]
        self.mentions = _mentions(text)
        self.where = {m: self._clause_at(m.start) for m in self.mentions}
        self._by_clause: dict[int, list[_Mention]] = {}
        for mention in self.mentions:
            self._by_clause.setdefault(self.where[mention], []).append(mention)
        self.salad: set[int] = set()  # clauses that are bags of feature keywords: they ask nothing
        for index, clause in enumerate(self.clauses):
            named = len(self._by_clause.get(index, []))
            if named >= SALAD_MENTIONS and 2 * len(_STRUCTURE.findall(text, clause.start, clause.end)) < named:
                self.salad.add(index)
        spans = [(m.start, m.end) for m in self.mentions]
        self.cues: dict[int, list[_Cue]] = {}
        self.topics: dict[int, list[int]] = {}
        for cue in _CUES.finditer(text):
            if any(a <= cue.start() and cue.end() <= b for a, b in spans):
                continue  # a word of a mention ("speed test", "turn it off and back on")
            index = self._clause_at(cue.start())
            kind = _cue_kind(text, self.clauses[index], cue.start(), cue.group(), cue.lastgroup) if index >= 0 else None
            if kind is not None:
                self.cues.setdefault(index, []).append(_Cue(cue.start(), cue.end(), kind, cue.group()))
            elif cue.group().endswith("ing") and index >= 0:
                self.topics.setdefault(index, []).append(cue.start())  # a verb-ing that asks nothing: its object is a topic
        for index, clause in enumerate(self.clauses):
            after = self.clauses[index + 1] if index + 1 < len(self.clauses) else None
            if clause.sequenced and after and (self.cues.get(index + 1) or _PLEASE.search(text, after.start, after.end)):
                done = [_Cue(d.start("verb"), d.end("verb"), "write", d.group("verb")) for d in _DONE.finditer(text, clause.start, clause.end)]
                self.cues[index] = sorted(self.cues.get(index, []) + done, key=lambda cue: cue.start)  # "once you've turned X off, ..."

    def intents(self) -> list[tuple[str, Feature, str]]:
        return _intents_of(self.events())

    def _clause_at(self, position: int) -> int:
        """The index of the clause that holds ``position`` (the last one starting at or before it; -1 before the first)."""
        return bisect.bisect_right(self._starts, position) - 1

    def _inside(self, index: int) -> list[_Mention]:
        return self._by_clause.get(index, [])

    def events(self) -> list[_Event]:
        out: list[_Event] = []
        for mention in self.mentions:
            if self.where[mention] >= 0 and self.where[mention] not in self.salad:
                out += self._mention(mention)
        for index, clause in enumerate(self.clauses):
            if index not in self.salad:
                out += self._pronouns(index, clause)
                out += self._do_that(index, clause)
        for keep in _KEEP.finditer(self.text):
            name = "obj" if keep.group("obj") is not None else "obj2"
            start, end = keep.span(name)
            named = [m for m in self.mentions if start <= m.start < end]
            if not named and _PRONOUN.search(keep.group(name) or ""):
                plural = bool(_PLURAL.search(keep.group(name)))
                named = self._referents(keep.start(), self._clause_at(keep.start()), plural=plural)
            out += [(keep.start(), None, m.feature, "", True) for m in named]
        return sorted(out, key=lambda event: event[0])

    def _mention(self, mention: _Mention) -> list[_Event]:
        text, index = self.text, self.where[mention]
        clause = self.clauses[index]
        feature = mention.feature
        if _NOT_THE.search(text[clause.start : mention.start]):
            return [(mention.start, None, feature, "", True)]  # "turn off airplane mode, not mobile data"
        word = text[mention.start : mention.end]
        if feature.name == "reboot" or (feature.name == "payment" and word == "pay"):  # the mention is its own verb
            done = any(c.start == mention.start for c in self.cues.get(index, []))  # "once you've restarted, ..."
            if word.endswith("ed") and not done:
                return []  # "you already restarted"
            if _cue_kind(text, clause, mention.start, word.split()[0], "write") is None:
                return []
            said = text[clause.start : mention.start]
            if mention.start > clause.head and not (done or _VERB_BEFORE.search(said) or _SUGGESTED.search(said)):
                return []  # "a restart might help", "... sim card reboot restart permissions ..."
            kind, keep = _judge_write(text, clause, mention.start)
            return [(mention.start, kind, feature, text[mention.start : clause.end], keep)]
        inside = self._inside(index)
        before = [c for c in self.cues.get(index, []) if c.end <= mention.start]
        cue = before[-1] if before else None
        unknown = _UNKNOWN_VERB.search(text, clause.start, mention.start)
        if unknown and unknown.start("verb") >= (cue.end if cue else clause.start):
            return []  # "please defragment your SIM card", "could you clear the cache on your SIM?": no action of the phone's
        if cue is None or cue.kind == "nav":
            act = _AND_ACT.match(text, mention.end, clause.end)
            if cue is not None and act and not any(act.end() <= m.start for m in inside if m.start > mention.end):
                kind, keep = _judge_write(text, clause, act.end())  # "go to APN settings and choose reset to default"
                return [(mention.start, kind, feature, text[act.end() : clause.end], keep)]
            if cue is not None:
                return [(mention.start, _judge_read(text, clause, cue.start), feature, "", False)]
            passive = _PASSIVE.match(text, mention.end, clause.end)
            if passive:  # "roaming has to be enabled"
                if re.search(r"(?:\bnot|n't|\bnever)\b", passive.group("gap") or ""):
                    return [(mention.start, None, feature, "", True)]
                kind, keep = _judge_write(text, clause, mention.start)
                return [(mention.start, kind, feature, text[mention.end : clause.end], keep)]
            if any(topic < mention.start for topic in self.topics.get(index, [])):
                return []  # "toggling airplane mode is the magic cure, right?"
            if clause.question:
                return [(mention.start, _judge_read(text, clause, mention.start), feature, "", False)]
            sentence = [i for i, c in enumerate(self.clauses) if c.sentence == clause.sentence]
            if clause.listed == "read" and not any(self.cues.get(i) for i in sentence):
                return [(mention.start, _judge_read(text, clause, mention.start), feature, "", False)]
            if (_PLEASE.search(text, clause.start, clause.end) or clause.listed) and not any(self.cues.get(i) for i in sentence):
                window = _direction_window(text, clause, mention.start, mention, inside)  # "airplane mode off, please"
                if feature.write is not None and direction(window):
                    kind, keep = _judge_write(text, clause, mention.start)
                    return [(mention.start, kind, feature, window, keep)]
                return [(mention.start, _judge_read(text, clause, mention.start), feature, "", False)]
            return []  # a statement: "airplane mode is on"
        if cue.kind == "read":
            return [(mention.start, _judge_read(text, clause, cue.start), feature, "", False)]
        kind, keep = _judge_write(text, clause, cue.start)
        return [(mention.start, kind, feature, _direction_window(text, clause, cue.start, mention, inside), keep)]

    def _referents(self, position: int, index: int, plural: bool) -> list[_Mention]:
        """The features a pronoun at ``position`` stands for: the nearest with an action before it, in its
        sentence or the one before (all of that mention's clause for "them")."""
        sentence = self.clauses[index].sentence if index >= 0 else 0
        before = [
            m
            for m in self.mentions
            if m.end <= position
            and m.feature.write is not None
            and self.clauses[self.where[m]].sentence >= sentence - 1
        ]
        if not before:
            return []
        if plural:
            return [m for m in before if self.where[m] == self.where[before[-1]]]
        return [before[-1]]

    def _pronouns(self, index: int, clause: _Clause) -> list[_Event]:
        """An action verb whose object is a pronoun: "turn it off", "reset them", "put it back"."""
        out: list[_Event] = []
        cues = self.cues.get(index, [])
        for i, cue in enumerate(cues):
            if cue.kind != "write":
                continue
            end = cues[i + 1].start if i + 1 < len(cues) else clause.end
            if any(cue.start <= m.start < end for m in self.mentions):
                continue
            pronoun = _PRONOUN.search(self.text, cue.end, end)
            if not pronoun:
                continue
            kind, keep = _judge_write(self.text, clause, cue.start)
            for mention in self._referents(cue.start, index, plural=bool(_PLURAL.match(pronoun.group()))):
                out.append((cue.start, kind, mention.feature, self.text[cue.start : end], keep))
        return out

    def _do_that(self, index: int, clause: _Clause) -> list[_Event]:
        """The actions of "do that", "do it", "go ahead": those of the features of the nearest clause before that names any."""
        out: list[_Event] = []
        for found in _DO_THAT.finditer(self.text, clause.start, clause.end):
            if _agent_speaks(self.text[clause.start : found.start()]):
                continue
            earlier = [
                i
                for i in range(index)
                if self.clauses[i].sentence >= clause.sentence - 1 and any(m.feature.write for m in self._inside(i))
            ]
            if not earlier:
                continue
            kind, keep = _judge_write(self.text, clause, found.start())
            target = self.clauses[earlier[-1]]
            for mention in self._inside(earlier[-1]):
                if mention.feature.write is not None:
                    out.append((found.start(), kind, mention.feature, self.text[mention.start : target.end], keep))
        return out


def _intents(text: str) -> list[tuple[str, Feature, str]]:
    """(kind, feature, window) asked for by a normalised message: one per feature, in the order of its first request."""
    return Reading(text).intents()


def claims_fixed(reading: Reading) -> bool:
    """The message says the issue is fixed or asks to try again (not inside a keyword salad)."""
    salad_only = bool(reading.salad) and all(i in reading.salad for i in reading.where.values() if i >= 0)
    return not salad_only and bool(_FIX_CLAIM.search(reading.text))


def _intents_of(events: list[_Event]) -> list[tuple[str, Feature, str]]:
    kept = {feature.name for _, _, feature, _, keep in events if keep}
    order: list[str] = []
    chosen: dict[str, tuple[str, Feature, str]] = {}
    for _, kind, feature, window in (event[:4] for event in events):
        if kind is None or (kind == "write" and (feature.write is None or feature.name in kept)):
            continue
        if kind == "read" and feature.read is None:
            continue
        if feature.name not in chosen:
            order.append(feature.name)
            chosen[feature.name] = (kind, feature, window)
        elif kind == "write" and chosen[feature.name][0] == "read":
            chosen[feature.name] = (kind, feature, window)
    return [chosen[name] for name in order]


# the words a misspelling is read as: within one edit, or two letters wrong in a long word, or the word's own letters
# with two moved (two swaps: "swtihc"; a doubled letter moved: "reebot"); the first letter kept
_SPELLED = ("turn", "toggle", "switch", "enable", "disable", "reset", "restart", "reboot", "check", "airplane", "mobile",
            "roaming", "status", "speed", "network", "connect", "disconnect", "settings")  # fmt: skip
# real words within those reaches, which are not their misspellings
_NOT_MISSPELLED = frozenset({"torn", "tern", "turf", "chuck", "chick", "cheek", "rest", "resent", "preset", "spend", "speedy",
                             "seed", "stats", "statue", "swatch", "foaming", "setting", "mobiles", "checks", "turns", "states",
                             "stitch", "snitch", "roaring", "rooming", "settling", "discontent", "reseat"})  # fmt: skip
# chat spellings, read as the words they stand for
_CHAT = {"u": "you", "ur": "your", "pls": "please", "plz": "please", "plse": "please", "thx": "thanks", "wanna": "want to",
         "gonna": "going to", "gotta": "got to", "lemme": "let me", "y'know": "you know", "cuz": "because", "coz": "because"}  # fmt: skip
_CHAT_WORD = re.compile(rf"(?<![\w'])(?:{'|'.join(map(re.escape, _CHAT))})(?![\w'])")
# a tool's name (snake_case) names its feature, and its verb asks nothing: "the toggle_roaming function" is roaming's
_IDENTIFIER = re.compile(r"\b([a-z]+)_([a-z0-9]+(?:_[a-z0-9]+)*)\b")
# a run of one-word sentences is one sentence said with emphasis: "Turn. Off. Roaming."
_STACCATO = re.compile(r"(?:^|(?<=[.!?\n]))(\s*)((?:[a-z']+[.!]+\s+){2,})(?=[a-z])")
# list markers that are no words: bullets begin a line
_BULLET = re.compile(r"\s*[\u2022\u00b7\u25aa\u25e6\u25cf\u25ba]\s*")


_SUFFIXES = ("s", "d", "ed", "es", "r", "er", "ing", "ting", "ning")
_SINGLE = re.compile(r"(.)\1+")


def _edits_apart(a: str, b: str, limit: int) -> bool:
    """Whether ``a`` and ``b`` are at most ``limit`` edits apart (insertions, deletions, substitutions, swaps of neighbours)."""
    if abs(len(a) - len(b)) > limit:
        return False
    previous, row = None, list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (x != y))
            if previous is not None and i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                current[j] = min(current[j], previous[j - 2] + 1)
        previous, row = row, current
    return row[-1] <= limit


@functools.lru_cache(maxsize=4096)
def _spelled(word: str) -> str:
    if len(word) < 4 or word in _SPELLED or word in _NOT_MISSPELLED:
        return word
    if any(word.startswith(target) and word[len(target) :] in _SUFFIXES for target in _SPELLED):
        return word  # "enabled", "checks", "resetting": the reader's own forms
    for target in _SPELLED:
        if target[0] != word[0] or not _edits_apart(word, target, 2):
            continue
        long_enough = len(target) >= 8 and len(word) == len(target)  # two letters wrong in a long word ("airplain")
        moved = sorted(word) == sorted(target) or _SINGLE.sub(r"\1", word) == _SINGLE.sub(r"\1", target)
        if long_enough or moved or _edits_apart(word, target, 1):
            return target
    return word



def _identifier(found: re.Match) -> str:
    verb, rest = found.group(1), found.group(2).replace("_", " ")
    return rest if _CUES.fullmatch(verb) else f"{verb} {rest}"


def normalise(text: Any) -> str:
    text = text if isinstance(text, str) else ""
    text = text[:MAX_MESSAGE_CHARS].lower().replace("\u2019", "'")
    text = _IDENTIFIER.sub(_identifier, text).replace("_", " ")
    text = _BULLET.sub("\n", text)
    text = _CHAT_WORD.sub(lambda word: _CHAT[word.group()], text)
    text = re.sub(r"\bwi[\s-]?fi\b", "wifi", text)
    text = re.sub(r"\bre[\s-](seat|insert|start|boot)", r"re\1", text)
    text = re.sub(r"\b(?:aero|air)[\s-]?plane\b", "airplane", text)
    text = re.sub(r"\bflight mode\b", "airplane mode", text)
    text = re.sub(r"[a-z]+", lambda word: _spelled(word.group()), text)  # one misspelled word: "trun", "restrat", "moblie"
    text = _STACCATO.sub(lambda run: run.group(1) + re.sub(r"[.!]+", "", run.group(2)), text)
    # requests that read as negations or lack a verb: "don't forget to turn...", "why don't you try...", "get it back on"
    text = re.sub(r"\b(?:don't|do not|never) forget to\b", "be sure to", text)
    text = re.sub(r"\bwhy (?:don't you|not)\b", "please", text)
    text = re.sub(r"\bget\b(?=[^.!?;,]{0,40}\bback (?:on|off)\b)", "turn", text)
    return text


# the phone tools an action request may run: the write tool(s) and the reading taken before a directed switch
_ACTION_TOOLS = {
    "apn": frozenset({"reset_apn_settings", "set_apn_settings"}),
    "vpn": frozenset({"connect_vpn", "disconnect_vpn", "check_vpn_status"}),
}


def requests(message: Any) -> list[tuple[str, str]]:
    """What a message asks of the phone: (kind, feature name) with kind "write" or "read", in order."""
    try:
        return [(kind, feature.name) for kind, feature, _ in _intents(normalise(message))]
    except Exception:  # the rules must never crash a rollout
        logger.exception("offline customer failed to read %r", str(message)[:80])
        return []


def requested_tools(message: Any, goal_tool: str | None = None) -> frozenset[str]:
    """The phone tools a message asks the customer to run (the module docstring), whichever customer
    answers it: an action's write tools and the reading it takes first, a reading's tool, and the goal
    reading (``goal_tool``) when the message says the issue is fixed or asks to try again."""
    try:
        reading = Reading(normalise(message))
        tools: set[str] = set()
        for kind, feature, _ in reading.intents():
            if kind == "read":
                tools.add(feature.read)
            elif feature.write in _ACTION_TOOLS:
                tools |= _ACTION_TOOLS[feature.write]
            else:
                tools.add(feature.write)
                tools.update(t for t in (TOGGLE_STATE.get(feature.write, (None,))[0],) if t)
        if goal_tool and claims_fixed(reading):
            tools.add(goal_tool)
        return frozenset(tools)
    except Exception:
        logger.exception("offline customer failed to read %r", str(message)[:80])
        return frozenset()
