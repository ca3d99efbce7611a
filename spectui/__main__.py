try:
    from spectui.cli.main import main
except KeyboardInterrupt:  # Ctrl+C while spectui itself loads: the same exit as later, no traceback
    raise SystemExit(130) from None

raise SystemExit(main())
