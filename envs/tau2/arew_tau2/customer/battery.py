"""A phrase battery for the offline customer's reading of agent messages (:func:`arew_tau2.customer.reading.requests`).

Each entry is an agent message and what a careful person on the phone would take it to ask for: the (kind,
feature) pairs, "write" for an action, "read" for a reading, in the order asked; an empty tuple for a message
that asks for nothing. The messages were written for this battery, apart from the reader's own tests, in
categories: plain requests in the common English forms, indirect and polite requests, lists, one misspelled
word, long explanations around one request, negations, sarcasm, actions the phone does not have, messages in
another language (the customer speaks English: nothing is done), and statements that mention a repair and ask
for nothing (a tool name quoted as reference, what others did, what a help page says, a step already past, a
conditional). ``benchmarks/customer_reading.py`` measures the misreading rate per category.
"""

from __future__ import annotations

W, R = "write", "read"

BATTERY: dict[str, tuple[tuple[str, tuple[tuple[str, str], ...]], ...]] = {
    "plain": (
        ("Turn off airplane mode.", ((W, "airplane"),)),
        ("Please switch your mobile data on.", ((W, "mobile_data"),)),
        ("Restart your phone, please.", ((W, "reboot"),)),
        ("Can you check the status bar for me?", ((R, "status_bar"),)),
        ("Enable data roaming.", ((W, "roaming"),)),
        ("Run a speed test.", ((R, "speed"),)),
        ("Please reset your APN settings to default.", ((W, "apn"),)),
        ("Could you try sending a picture message?", ((R, "mms"),)),
        ("Disconnect the VPN, please.", ((W, "vpn"),)),
        ("Take out your SIM card and put it back in.", ((W, "sim"),)),
        ("Turn Wi-Fi calling off.", ((W, "wifi_calling"),)),
        ("Please disable data saver mode.", ((W, "data_saver"),)),
        # written after the reader's rules were fixed against the lines above, and measured before any change
        ("Switch off your Wi-Fi.", ((W, "wifi"),)),
        ("Please connect to the VPN.", ((W, "vpn"),)),
        ("Check your SIM card status, please.", ((R, "sim"),)),
        ("Reboot the device now.", ((W, "reboot"),)),
        # a third wave, written against the same reader as the second and measured before any change
        ("Please turn your mobile data on.", ((W, "mobile_data"),)),
        ("Could you restart the phone now?", ((W, "reboot"),)),
        ("Check whether airplane mode is on.", ((R, "airplane"),)),
        ("Turn roaming on, please.", ((W, "roaming"),)),
    ),
    "indirect": (
        ("Don't forget to turn mobile data back on.", ((W, "mobile_data"),)),
        ("Why don't you try restarting the phone?", ((W, "reboot"),)),
        ("How about turning off airplane mode?", ((W, "airplane"),)),
        ("Let's get your mobile data back on.", ((W, "mobile_data"),)),
        ("I need you to enable roaming.", ((W, "roaming"),)),
        ("It would help if you checked your status bar.", ((R, "status_bar"),)),
        ("The next step is for you to reset the APN settings.", ((W, "apn"),)),
        ("Go ahead and reboot the phone.", ((W, "reboot"),)),
        # written after the reader's rules were fixed against the lines above, and measured before any change
        ("You'll want to turn off data saver.", ((W, "data_saver"),)),
        ("The fix here is to disable airplane mode, so go ahead.", ((W, "airplane"),)),
        ("Try toggling Wi-Fi calling.", ((W, "wifi_calling"),)),
        ("What I'd suggest is restarting your phone.", ((W, "reboot"),)),
        # a third wave, written against the same reader as the second and measured before any change
        ("It might be worth restarting your phone at this point.", ((W, "reboot"),)),
        ("Can I get you to switch airplane mode off?", ((W, "airplane"),)),
        ("You should disconnect from the VPN.", ((W, "vpn"),)),
    ),
    "polite": (
        ("Would you mind turning airplane mode off?", ((W, "airplane"),)),
        ("If it's not too much trouble, could you restart your device?", ((W, "reboot"),)),
        ("Could you please be so kind as to check whether mobile data is on?", ((R, "mobile_data"),)),
        ("I'd be grateful if you could run a speed test.", ((R, "speed"),)),
        ("When you have a moment, please look at your status bar.", ((R, "status_bar"),)),
        ("May I ask you to toggle Wi-Fi calling?", ((W, "wifi_calling"),)),
        # written after the reader's rules were fixed against the lines above, and measured before any change
        ("Kindly run a speed test.", ((R, "speed"),)),
        ("Could I trouble you to check your APN settings?", ((R, "apn"),)),
        # a third wave, written against the same reader as the second and measured before any change
        ("Would you be able to check your status bar?", ((R, "status_bar"),)),
        ("Could I trouble you to run a speed test?", ((R, "speed"),)),
    ),
    "lists": (
        (
            "Please do these two things: 1. turn off airplane mode 2. restart the phone.",
            ((W, "airplane"), (W, "reboot")),
        ),
        ("Two steps: first enable mobile data, then run a speed test.", ((W, "mobile_data"), (R, "speed"))),
        ("Could you - check the status bar - and then toggle roaming?", ((R, "status_bar"), (W, "roaming"))),
        ("Steps:\n- disable the VPN\n- reboot", ((W, "vpn"), (W, "reboot"))),
        # written after the reader's rules were fixed against the lines above, and measured before any change
        ("Please: turn on mobile data, turn off data saver.", ((W, "mobile_data"), (W, "data_saver"))),
        ("a) reboot b) check the status bar", ((W, "reboot"), (R, "status_bar"))),
        # a third wave, written against the same reader as the second and measured before any change
        ("Two things: turn off airplane mode, then restart the phone.", ((W, "airplane"), (W, "reboot"))),
        ("First check the status bar, and after that run a speed test.", ((R, "status_bar"), (R, "speed"))),
    ),
    "misspelled": (
        ("Please trun off airplane mode.", ((W, "airplane"),)),
        ("Could you restrat your phone?", ((W, "reboot"),)),
        ("Please turn off airplain mode.", ((W, "airplane"),)),
        ("Can you enable moblie data?", ((W, "mobile_data"),)),
        ("Please chek your status bar.", ((R, "status_bar"),)),
        ("Please enabel roaming.", ((W, "roaming"),)),
        ("Could you resett your APN settings?", ((W, "apn"),)),
        ("Please run a sped test.", ((R, "speed"),)),
        # written after the reader's rules were fixed against the lines above, and measured before any change
        ("Please togle airplane mode.", ((W, "airplane"),)),
        ("Could you swich on mobile data?", ((W, "mobile_data"),)),
        ("Please reebot your phone.", ((W, "reboot"),)),
        ("Chekc the status bar please.", ((R, "status_bar"),)),
        # a third wave, written against the same reader as the second and measured before any change
        ("Turn off airplane mdoe, please.", ((W, "airplane"),)),
        ("Can you enable romaing?", ((W, "roaming"),)),
        ("Please disabel the VPN.", ((W, "vpn"),)),
    ),
    "long": (
        (
            "Thanks for your patience so far. I understand how frustrating it is when your phone doesn't work the way "
            "you expect, especially when you need it for work. Based on what you've told me, the most likely cause is "
            "a setting on the phone itself. Could you please turn off airplane mode?",
            ((W, "airplane"),),
        ),
        (
            "I looked at your account and everything is in order on our side: the line is active and the bill is paid. "
            "So the issue must be on the device. To narrow it down, please check what your status bar shows right now.",
            ((R, "status_bar"),),
        ),
        (
            "Sometimes the phone keeps an old network configuration after a trip abroad, and then data stops working even "
            "though the signal looks fine. That's very common and easy to fix. Please reset your APN settings.",
            ((W, "apn"),),
        ),
        # written after the reader's rules were fixed against the lines above, and measured before any change
        (
            "I know this has taken a while, and I appreciate you staying on the line with me. I've gone through your "
            "account and there's nothing blocking it from our side. Please restart your phone and tell me what happens.",
            ((W, "reboot"),),
        ),
        # a third wave, written against the same reader as the second and measured before any change
        (
            "I completely understand, and I'm sorry this has been going on since this morning. From what you "
            "describe the line itself is fine and the problem is how the phone connects abroad, so please turn on "
            "data roaming and let me know once it's done.",
            ((W, "roaming"),),
        ),
    ),
    "negations": (
        ("Please don't restart your phone yet.", ()),
        ("There is no need to reset the APN settings.", ()),
        ("Do not touch airplane mode.", ()),
        ("No, never mind the VPN; just check your status bar.", ((R, "status_bar"),)),
        ("Ne désactivez pas les données mobiles.", ()),
        ("I wouldn't turn off Wi-Fi calling.", ()),
        # written after the reader's rules were fixed against the lines above, and measured before any change
        ("Don't reset your APN, it's fine.", ()),
        ("You shouldn't need to restart.", ()),
        ("Not airplane mode - that's already off.", ()),
        # a third wave, written against the same reader as the second and measured before any change
        ("Don't restart the phone yet; first check the status bar.", ((R, "status_bar"),)),
        ("Please leave the VPN alone for now.", ()),
    ),
    "sarcasm": (
        ("Oh sure, because restarting the phone fixes everything.", ()),
        ("Yeah, toggling airplane mode is the magic cure for all problems, right?", ()),
        # written after the reader's rules were fixed against the lines above, and measured before any change
        ("Sure, let's just reset everything and hope for the best.", ()),
        ("Great, another customer who hasn't restarted their phone.", ()),
        # a third wave, written against the same reader as the second and measured before any change
        ("Right, as if resetting the APN ever helped anyone.", ()),
    ),
    "unknown_actions": (
        ("Please defragment your SIM card.", ()),
        ("Could you recalibrate the antenna?", ()),
        ("Please factory reset the modem firmware.", ()),
        ("Please clear the roaming cache.", ()),
        ("Please polish the contacts on your SIM card.", ()),
        # written after the reader's rules were fixed against the lines above, and measured before any change
        ("Please reformat your SIM card.", ()),
        ("Could you overclock your phone?", ()),
        ("Please unlock the bootloader.", ()),
        # a third wave, written against the same reader as the second and measured before any change
        ("Please recharge the SIM card's battery.", ()),
        ("Could you update the roaming firmware?", ()),
    ),
    "other_languages": (
        ("Apaga el modo avión, por favor.", ()),
        ("Bitte starte dein Telefon neu.", ()),
        ("Veuillez activer les données mobiles.", ()),
        ("Per favore, riavvia il telefono.", ()),
        # written after the reader's rules were fixed against the lines above, and measured before any change
        ("Por favor, reinicia tu teléfono.", ()),
        ("Schalte bitte den Flugmodus aus.", ()),
        # a third wave, written against the same reader as the second and measured before any change
        ("Ligue os dados móveis, por favor.", ()),
    ),
    "statements": (
        ("The tool toggle_airplane_mode is what we use for that.", ()),
        ("For reference, the usual fixes are toggle_airplane_mode and reset_apn_settings.", ()),
        ("The usual fixes are turning off airplane mode and resetting the APN.", ()),
        ("Last week another customer fixed this by resetting the APN settings.", ()),
        ("A colleague of mine always tells people to restart their phone.", ()),
        ("Our help page says to reboot the phone when data stops working.", ()),
        ("The manual recommends turning airplane mode off and on.", ()),
        ("We are past the reboot step now.", ()),
        ("You already restarted the phone earlier, so that is done.", ()),
        ("If the status bar showed no signal, we would reset the APN.", ()),
        ("In some cases people enable roaming when they travel.", ()),
        ("Mobile data toggles are in the settings app.", ()),
        # written after the reader's rules were fixed against the lines above, and measured before any change
        ("When I had this problem myself, I turned off airplane mode.", ()),
        ("The knowledge base article lists resetting the APN as step three.", ()),
        ("We already tried toggling mobile data earlier.", ()),
        ("Roaming is usually what people forget to enable.", ()),
        ("The previous agent asked you to restart the phone.", ()),
        # a third wave, written against the same reader as the second and measured before any change
        ("Restarting the phone is usually the first thing we'd try.", ()),
        ("The reset_apn_settings tool exists for cases like this.", ()),
        ("Some customers find that turning off data saver helps.", ()),
        ("Earlier you mentioned you had already enabled roaming.", ()),
    ),
}


def battery_size() -> int:
    return sum(len(entries) for entries in BATTERY.values())
