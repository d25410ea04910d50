"""A phrase battery for the offline customer's reading of agent messages (:func:`arew_tau2.customer.reading.requests`).

Each entry is an agent message and what a careful person on the phone would take it to ask for: the (kind,
feature) pairs, "write" for an action, "read" for a reading, in the order asked; an empty tuple for a message
that asks for nothing. The messages were written for this battery, apart from the reader's own tests, in
categories: plain requests in the common English forms, indirect and polite requests, lists, one misspelled
word, long explanations around one request, negations, sarcasm, actions the phone does not have, messages in
another language (the customer speaks English: nothing is done), statements that mention a repair and ask
for nothing (a tool name quoted as reference, what others did, what a help page says, a step already past, a
conditional), questions about the phone's state (a reading), a statement followed by one request, quoted speech,
hedged requests, one step sequenced after another ("once you've ..., ..."), British and American wording, noise
(capitals, emoji, chat spelling, punctuation) and contractions. Each category holds waves of messages, marked
in comments: the first written with the reader's rules, each later one written afterwards and measured before
the reader changed. ``benchmarks/customer_reading.py`` measures the misreading rate per category.
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
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("Turn on Wi-Fi calling please.", ((W, "wifi_calling"),)),
        ("Can you disable roaming for me?", ((W, "roaming"),)),
        ("Please re-seat your SIM card.", ((W, "sim"),)),
        ("Open Settings and turn off Data Saver.", ((W, "data_saver"),)),
        ("Set your network mode to 4G/LTE.", ((W, "network_mode"),)),
        ("Please pay the outstanding bill from your phone.", ((W, "payment"),)),
        ("Please give the messaging app permission to use storage.", ((W, "permission"),)),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("Please go into Settings and switch Wi-Fi off.", ((W, "wifi"),)),
        ("Could you reinsert your SIM card for me?", ((W, "sim"),)),
        ("Grant the messaging app access to SMS.", ((W, "permission"),)),
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
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("You'll need to switch off airplane mode for this to work.", ((W, "airplane"),)),
        ("My recommendation would be a quick reboot of the handset.", ((W, "reboot"),)),
        ("The best thing to do now is to turn mobile data back on.", ((W, "mobile_data"),)),
        ("Let's have you toggle airplane mode on and then off again.", ((W, "airplane"),)),
        ("I'd suggest turning on data roaming since you're abroad.", ((W, "roaming"),)),
        ("A good next step would be resetting the APN settings on your end.", ((W, "apn"),)),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("The quickest fix would be a restart of your phone.", ((W, "reboot"),)),
        ("You're going to want to turn roaming on.", ((W, "roaming"),)),
        ("Let's go ahead and get Wi-Fi calling switched on.", ((W, "wifi_calling"),)),
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
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("Would you kindly restart the phone for me?", ((W, "reboot"),)),
        ("If you could turn off the VPN, that would be great.", ((W, "vpn"),)),
        ("Could you do me a favour and check your Wi-Fi calling setting?", ((R, "wifi_calling"),)),
        ("Please, when you get a chance, run a quick speed test.", ((R, "speed"),)),
        ("Do you think you could enable mobile data for me?", ((W, "mobile_data"),)),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("Would it be possible for you to run a speed test?", ((R, "speed"),)),
        ("I'd really appreciate it if you could toggle airplane mode for me.", ((W, "airplane"),)),
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
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("Here's what I need:\n1) Airplane mode off\n2) Mobile data on", ((W, "airplane"), (W, "mobile_data"))),
        ("A. Turn off Wi-Fi\nB. Run a speed test", ((W, "wifi"), (R, "speed"))),
        (
            "Please do the following: \u2022 disable data saver \u2022 restart the phone",
            ((W, "data_saver"), (W, "reboot")),
        ),
        (
            "Step 1: go to Settings > Network and set the preferred network type to 5G. Step 2: reboot.",
            ((W, "network_mode"), (W, "reboot")),
        ),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        (
            "Okay, three things, in order: (1) airplane mode off, (2) restart, (3) speed test.",
            ((W, "airplane"), (W, "reboot"), (R, "speed")),
        ),
        (
            "To do:\n* enable mobile data\n* check the status bar",
            ((W, "mobile_data"), (R, "status_bar")),
        ),
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
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("Can you tunr on mobile data?", ((W, "mobile_data"),)),
        ("Please disconect the VPN.", ((W, "vpn"),)),
        ("Could you restar your phone?", ((W, "reboot"),)),
        ("Please swtich off data saver.", ((W, "data_saver"),)),
        ("Can you check your staus bar?", ((R, "status_bar"),)),
        ("Please reste the APN settings.", ((W, "apn"),)),
        ("Turn of airplane mode please.", ((W, "airplane"),)),
        ("Plz rebot the phone.", ((W, "reboot"),)),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("Can you diable data saver?", ((W, "data_saver"),)),
        ("Please run a speeed test.", ((R, "speed"),)),
        ("Pls restrat the phone.", ((W, "reboot"),)),
        ("Please tirn off roaming.", ((W, "roaming"),)),
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
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        (
            "I'm really sorry for all the back and forth today, and I can see from your notes that you've already "
            "spoken to two of my colleagues about this. I've double-checked your plan, your billing and the line itself, "
            "and everything looks correct: there's no outage in your area and roaming is included in your package. One "
            "of my colleagues mentioned that resetting the APN sometimes helps in cases like yours, but I don't think "
            "that's the issue here. What I'd like you to do instead is open your settings and turn on data roaming, "
            "since you're currently abroad. Let me know once that's done and we'll take it from there.",
            ((W, "roaming"),),
        ),
        (
            "Thank you for confirming that. So, to recap where we are: the phone shows full signal, Wi-Fi is off, and "
            "you can make calls but nothing loads in the browser. That pattern usually points at either mobile data "
            "being switched off or a data saver setting being too aggressive. Before we change anything, I'd like to "
            "get a clear picture, so could you please run a speed test and tell me the result?",
            ((R, "speed"),),
        ),
        (
            "Okay, great news: the SIM is showing as active and the account has no restrictions on it. I know you "
            "mentioned you had already restarted the phone twice this morning, so we won't do that again. The last "
            "thing I want to look at is the network mode. Some phones drop back to 2G only after an update, which "
            "makes data painfully slow. Could you check which network mode is selected right now?",
            ((R, "network_mode"),),
        ),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        (
            "Hi again, and thanks for holding. I went through the notes from your last call: my colleague had you reset "
            "the APN settings and reseat the SIM, and neither of those made a difference, which tells me the problem is "
            "probably elsewhere. Your line is active, your bill is paid, and there's no outage near you. The one thing "
            "nobody seems to have checked yet is whether data roaming is enabled, and since you're travelling that's the "
            "most likely culprit. Would you check that for me?",
            ((R, "roaming"),),
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
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("There's no reason to touch your APN settings.", ()),
        ("Please don't switch off mobile data.", ()),
        ("You don't have to restart the phone; just check whether Wi-Fi calling is on.", ((R, "wifi_calling"),)),
        ("Avoid enabling roaming while you're at home.", ()),
        ("I would not recommend resetting the APN at this stage.", ()),
        ("Leave airplane mode as is and turn on mobile data instead.", ((W, "mobile_data"),)),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("Whatever you do, don't reset the APN.", ()),
        ("There's really no point restarting again.", ()),
        ("Please keep mobile data on and don't touch roaming.", ()),
    ),
    "sarcasm": (
        ("Oh sure, because restarting the phone fixes everything.", ()),
        ("Yeah, toggling airplane mode is the magic cure for all problems, right?", ()),
        # written after the reader's rules were fixed against the lines above, and measured before any change
        ("Sure, let's just reset everything and hope for the best.", ()),
        ("Great, another customer who hasn't restarted their phone.", ()),
        # a third wave, written against the same reader as the second and measured before any change
        ("Right, as if resetting the APN ever helped anyone.", ()),
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("Because obviously turning it off and on again solves every problem in the universe.", ()),
        ("Oh yes, resetting the APN again will surely fix it this time.", ()),
        ("Yeah right, like toggling Wi-Fi has ever fixed anything.", ()),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("Sure, let's just restart it again, because that worked so well the last five times.", ()),
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
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("Please flash a new firmware to your phone.", ()),
        ("Could you clear the cache on your SIM card?", ()),
        ("Please recalibrate your signal bars.", ()),
        ("Can you defrag the phone's storage?", ()),
        ("Could you ping our server from your phone?", ()),
        ("Please boost the roaming signal.", ()),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("Please update the carrier settings profile.", ()),
        ("Please wipe the Wi-Fi passwords.", ()),
        ("Can you reinstall the messaging app?", ()),
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
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("Desactiva los datos m\u00f3viles, por favor.", ()),
        ("Red\u00e9marrez votre t\u00e9l\u00e9phone, s'il vous pla\u00eet.", ()),
        ("Schalten Sie bitte das WLAN aus.", ()),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("Mach bitte die mobilen Daten an.", ()),
        ("Riattiva i dati mobili, per favore.", ()),
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
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("Many of our customers tell us that restarting the phone fixes this.", ()),
        ("According to our records, you reset the APN settings yesterday.", ()),
        ("My supervisor usually recommends turning off data saver first.", ()),
        ("The toggle_roaming function simply flips roaming on or off.", ()),
        ("Our troubleshooting script says to toggle airplane mode next.", ()),
        ("Technically speaking, rebooting clears the network cache.", ()),
        ("The engineers resolved a similar case by switching the network mode to LTE.", ()),
        ("Airplane mode cuts every radio on the device, including Wi-Fi.", ()),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("Roaming charges don't apply on your plan, so that's not a concern.", ()),
        ("The engineering team suggested toggling airplane mode in cases like yours.", ()),
        ("You turned Wi-Fi calling on last night, if I'm reading this right.", ()),
        ("For what it's worth, a lot of folks restart their phones when this happens.", ()),
        ("Per the troubleshooting guide, step four is resetting the APN.", ()),
    ),
    "questions": (
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("Is your mobile data turned on right now?", ((R, "mobile_data"),)),
        ("What does it say at the top of your screen?", ((R, "status_bar"),)),
        ("Are you connected to a VPN at the moment?", ((R, "vpn"),)),
        ("Do you have signal at the moment?", ((R, "network_status"),)),
        ("Which network mode is your phone set to?", ((R, "network_mode"),)),
        ("How fast is your internet right now?", ((R, "speed"),)),
        ("What apps do you have installed?", ((R, "installed_apps"),)),
        ("Is there a payment request waiting on your phone?", ((R, "payment"),)),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("Is data saver switched on at the moment?", ((R, "data_saver"),)),
        ("What network type does your phone show?", ((R, "network_mode"),)),
        ("Does your phone say it's connected to Wi-Fi?", ((R, "wifi"),)),
    ),
    "mixed": (
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        (
            "Your account looks fine and roaming is included in your plan. Please turn on data roaming now.",
            ((W, "roaming"),),
        ),
        ("I've reset your line on our side. Now please restart your phone.", ((W, "reboot"),)),
        ("Mobile data is on, which is good. Can you check what the status bar shows?", ((R, "status_bar"),)),
        ("The VPN may be interfering. Could you disconnect it?", ((W, "vpn"),)),
        (
            "Airplane mode seems to be enabled on your phone, and that blocks everything. Please switch it off.",
            ((W, "airplane"),),
        ),
        ("Your SIM is active on our end. Run a speed test for me.", ((R, "speed"),)),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("Roaming looks fine on our side. Please restart the phone now.", ((W, "reboot"),)),
        ("Your data saver is on, and that's throttling you. Turn it off, please.", ((W, "data_saver"),)),
    ),
    "quoted": (
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ('Another agent told you "turn off airplane mode", but that was a mistake on our part.', ()),
        ('A lot of customers ask "should I restart my phone?", and most of the time the answer is no.', ()),
        ('Your ticket notes say "customer advised to reset APN".', ()),
        ('My colleague wrote "reboot the phone" in your ticket, so please go ahead and do that.', ((W, "reboot"),)),
        ('You said "I already turned off airplane mode" earlier, thanks for that.', ()),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ('The FAQ line "turn off Wi-Fi calling if calls drop" doesn\'t apply to you.', ()),
        ('Tap "Reset to default" in the APN menu.', ((W, "apn"),)),
    ),
    "hedged": (
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("Maybe try turning Wi-Fi off for a moment?", ((W, "wifi"),)),
        ("It could help to restart the phone, if you don't mind.", ((W, "reboot"),)),
        ("Perhaps you could check whether data saver is on?", ((R, "data_saver"),)),
        ("I think switching to 4G might be worth a shot.", ((W, "network_mode"),)),
        ("It may be worth having a quick look at your APN settings.", ((R, "apn"),)),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("It might be a good idea to restart your phone.", ((W, "reboot"),)),
        ("Possibly try switching the network mode to 4G?", ((W, "network_mode"),)),
    ),
    "sequencing": (
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("Once you've turned airplane mode off, please restart the phone.", ((W, "airplane"), (W, "reboot"))),
        ("After you reboot, run a speed test.", ((W, "reboot"), (R, "speed"))),
        (
            "Turn mobile data on first, and when that's done check the status bar.",
            ((W, "mobile_data"), (R, "status_bar")),
        ),
        ("Before anything else, please check your network status.", ((R, "network_status"),)),
        ("As soon as the phone is back up, check whether you have signal.", ((R, "network_status"),)),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("When the phone is back on, run a speed test.", ((R, "speed"),)),
        (
            "First restart the phone; once it's back, check whether you have signal.",
            (
                (W, "reboot"),
                (R, "network_status"),
            ),
        ),
    ),
    "regional": (
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("Could you switch off flight mode, please?", ((W, "airplane"),)),
        ("Please disable aeroplane mode.", ((W, "airplane"),)),
        ("Have a look at your mobile data settings, would you?", ((R, "mobile_data"),)),
        ("Could you pop your SIM out and back in?", ((W, "sim"),)),
        ("Can you tell me what colour the signal icon is?", ((R, "status_bar"),)),
        ("Please switch your handset off and back on.", ((W, "reboot"),)),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("Could you pop into your settings and switch off mobile data roaming?", ((W, "roaming"),)),
        ("Give your handset a restart, would you?", ((W, "reboot"),)),
    ),
    "noise": (
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("PLEASE TURN OFF AIRPLANE MODE!!!", ((W, "airplane"),)),
        ("ok \U0001f44d now restart the phone \U0001f64f", ((W, "reboot"),)),
        ("can u check ur data saver??", ((R, "data_saver"),)),
        ("Turn. Off. Roaming.", ((W, "roaming"),)),
        ("Next step -> reset APN settings :)", ((W, "apn"),)),
        ("...so yeah, mobile data on please", ((W, "mobile_data"),)),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("restart ur phone pls!!!", ((W, "reboot"),)),
        ("AIRPLANE MODE \u2192 OFF", ((W, "airplane"),)),
    ),
    "contractions": (
        # a fourth wave, written against the reader after the third wave's fixes and measured before any change
        ("You'll wanna restart the phone now.", ((W, "reboot"),)),
        ("Roaming's probably off - can you check it?", ((R, "roaming"),)),
        ("Let's switch airplane mode off, shall we?", ((W, "airplane"),)),
        ("It isn't necessary to reboot, but you'd better disconnect the VPN.", ((W, "vpn"),)),
        ("Y'know what, let's not touch the APN - it's fine.", ()),
        # a fifth wave, written after the fourth wave's rules and measured before any change
        ("We'll need you to turn off data saver.", ((W, "data_saver"),)),
        ("Wouldn't hurt to toggle Wi-Fi off and on.", ((W, "wifi"),)),
    ),
}


def battery_size() -> int:
    return sum(len(entries) for entries in BATTERY.values())
