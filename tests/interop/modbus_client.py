"""An independent Modbus TCP client (pymodbus) against `plantd sim start`'s register map.

Usage: python3 modbus_client.py HOST PORT
Reads Pump_01 (asset 0) and Motor_01 (asset 1) of the default plant as float32 (high word first)
from input and holding registers, the Run_Status coil, and checks that an unmapped address is
refused with exception 2 (illegal data address). Exits non-zero at the first failure.
"""

import struct
import sys

from pymodbus.client import ModbusTcpClient


def check(ok, message):
    if not ok:
        print(f"FAIL: {message}")
        sys.exit(1)
    print(f"ok: {message}")


def as_float(registers):
    return struct.unpack(">f", struct.pack(">HH", registers[0], registers[1]))[0]


def main(host, port):
    client = ModbusTcpClient(host, port=port, timeout=5)
    check(client.connect(), f"connected to {host}:{port}")
    vib = client.read_input_registers(0, count=2)
    check(not vib.isError() and 0 <= as_float(vib.registers) <= 10,
          f"Pump_01.Vibration_X (input 0) = {as_float(vib.registers) if not vib.isError() else vib}")
    flow = client.read_holding_registers(14, count=2)
    check(not flow.isError() and 0 <= as_float(flow.registers) <= 500,
          f"Pump_01.Flow_Rate (holding 14) = {as_float(flow.registers) if not flow.isError() else flow}")
    coil = client.read_coils(0, count=1)
    check(not coil.isError() and coil.bits[0] is True, "Pump_01.Run_Status (coil 0) is on")
    volts = client.read_input_registers(104, count=2)
    check(not volts.isError() and 380 <= as_float(volts.registers) <= 420,
          f"Motor_01.Voltage_L1 (input 104) = {as_float(volts.registers) if not volts.isError() else volts}")
    bad = client.read_input_registers(20, count=2)
    check(bad.isError() and getattr(bad, "exception_code", None) == 2,
          f"unmapped address 20 refused with illegal data address ({bad})")
    client.close()
    print("all Modbus interop checks passed")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
