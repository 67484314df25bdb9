//! The simulator's Modbus TCP face: every numeric variable as a 32-bit float (IEEE 754, high
//! word first) in two input registers and the same two holding registers, every flag as a coil
//! and a discrete input. Asset `i` (in configuration order) starts at address `100 * i`; within
//! an asset, numeric variables take addresses `2 * k` and flags `m` in their order. Any unit id
//! is answered; writes are refused (illegal function).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio_modbus::{ExceptionCode, Request, Response};

use crate::catalog::DataType;
use crate::control::SimState;
use crate::engine::{Value, VariableView};

/// Registers (or bits) of one asset.
pub const ASSET_STRIDE: u16 = 100;

#[derive(Clone, Debug, PartialEq)]
pub struct Mapped {
    pub asset_id: String,
    pub name: String,
    /// First register (numeric) or bit (flag).
    pub address: u16,
    pub flag: bool,
    /// Where the value is ([`crate::Simulation::value_at`]).
    position: (usize, usize),
}

/// Where each variable is.
#[derive(Clone, Debug, Default)]
pub struct RegisterMap {
    pub entries: Vec<Mapped>,
}

impl RegisterMap {
    pub fn new(variables: &[VariableView]) -> Self {
        let mut entries = Vec::new();
        let mut asset_no: i64 = -1;
        let mut last_asset = "";
        let (mut k, mut m) = (0u16, 0u16);
        for v in variables {
            if v.asset_id != last_asset {
                last_asset = &v.asset_id;
                asset_no += 1;
                (k, m) = (0, 0);
            }
            let Ok(base) = u16::try_from(asset_no * i64::from(ASSET_STRIDE)) else {
                break; // Beyond 655 assets nothing more fits in the address space.
            };
            match v.data_type {
                DataType::Float | DataType::Int if 2 * k + 1 < ASSET_STRIDE => {
                    entries.push(Mapped {
                        asset_id: v.asset_id.clone(),
                        name: v.name.clone(),
                        address: base + 2 * k,
                        flag: false,
                        position: v.position,
                    });
                    k += 1;
                }
                DataType::Bool if m < ASSET_STRIDE => {
                    entries.push(Mapped {
                        asset_id: v.asset_id.clone(),
                        name: v.name.clone(),
                        address: base + m,
                        flag: true,
                        position: v.position,
                    });
                    m += 1;
                }
                _ => {}
            }
        }
        Self { entries }
    }

    /// One line per asset, for the start banner.
    pub fn describe(&self) -> Vec<String> {
        let mut lines: Vec<String> = Vec::new();
        let mut current = String::new();
        for e in &self.entries {
            if !current.is_empty() && !current.starts_with(&format!("{}:", e.asset_id)) {
                lines.push(std::mem::take(&mut current));
            }
            if current.is_empty() {
                current = format!("{}:", e.asset_id);
            }
            let kind = if e.flag { "coil" } else { "reg" };
            current.push_str(&format!(" {}={kind} {}", e.name, e.address));
        }
        if !current.is_empty() {
            lines.push(current);
        }
        lines
    }

    fn register(&self, address: u16) -> Option<(&Mapped, bool)> {
        self.entries
            .iter()
            .filter(|e| !e.flag)
            .find(|e| e.address == address || e.address + 1 == address)
            .map(|e| (e, e.address == address))
    }

    fn bit(&self, address: u16) -> Option<&Mapped> {
        self.entries.iter().find(|e| e.flag && e.address == address)
    }
}

/// Answers Modbus requests from the running simulation.
#[derive(Clone)]
pub struct ModbusService {
    state: Arc<SimState>,
    map: Arc<Mutex<(u64, Arc<RegisterMap>)>>,
}

impl ModbusService {
    pub fn new(state: Arc<SimState>) -> Self {
        let map = RegisterMap::new(&state.lock().snapshot());
        let generation = state.generation.load(Ordering::Acquire);
        Self {
            state,
            map: Arc::new(Mutex::new((generation, Arc::new(map)))),
        }
    }

    /// The current map (rebuilt after a configuration load).
    pub fn map(&self) -> Arc<RegisterMap> {
        let generation = self.state.generation.load(Ordering::Acquire);
        let mut slot = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if slot.0 != generation {
            *slot = (
                generation,
                Arc::new(RegisterMap::new(&self.state.lock().snapshot())),
            );
        }
        slot.1.clone()
    }

    fn answer(&self, req: Request<'static>) -> Result<Response, ExceptionCode> {
        let map = self.map();
        // Only the requested values are read (not a copy of every value per request).
        let sim = self.state.lock();
        let value = |e: &Mapped| {
            sim.value_at(e.position)
                .ok_or(ExceptionCode::ServerDeviceFailure)
        };
        let number = |e: &Mapped| -> Result<f32, ExceptionCode> {
            Ok(match value(e)? {
                Value::Number(x) => *x as f32,
                other => other.as_f64() as f32,
            })
        };
        let registers = |addr: u16, n: u16| -> Result<Vec<u16>, ExceptionCode> {
            if n == 0 || n > 125 {
                return Err(ExceptionCode::IllegalDataValue);
            }
            (0..n)
                .map(|i| {
                    let a = addr
                        .checked_add(i)
                        .ok_or(ExceptionCode::IllegalDataAddress)?;
                    let (e, high) = map.register(a).ok_or(ExceptionCode::IllegalDataAddress)?;
                    let bits = number(e)?.to_bits();
                    Ok(if high {
                        (bits >> 16) as u16
                    } else {
                        bits as u16
                    })
                })
                .collect()
        };
        let bits = |addr: u16, n: u16| -> Result<Vec<bool>, ExceptionCode> {
            if n == 0 || n > 2000 {
                return Err(ExceptionCode::IllegalDataValue);
            }
            (0..n)
                .map(|i| {
                    let a = addr
                        .checked_add(i)
                        .ok_or(ExceptionCode::IllegalDataAddress)?;
                    let e = map.bit(a).ok_or(ExceptionCode::IllegalDataAddress)?;
                    Ok(*value(e)? == Value::Flag(true))
                })
                .collect()
        };
        let served = match req {
            Request::ReadInputRegisters(a, n) => Response::ReadInputRegisters(registers(a, n)?),
            Request::ReadHoldingRegisters(a, n) => Response::ReadHoldingRegisters(registers(a, n)?),
            Request::ReadCoils(a, n) => Response::ReadCoils(bits(a, n)?),
            Request::ReadDiscreteInputs(a, n) => Response::ReadDiscreteInputs(bits(a, n)?),
            // Read Device Identification, basic objects (discovery asks for it).
            Request::ReadDeviceIdentification(_, _) => {
                use tokio_modbus::prelude::{
                    ConformityLevel, DeviceIdObject, ReadCode, ReadDeviceIdentificationResponse,
                };
                let object = |id: u8, text: &str| DeviceIdObject {
                    id,
                    value: text.as_bytes().to_vec().into(),
                };
                Response::ReadDeviceIdentification(ReadDeviceIdentificationResponse {
                    read_code: ReadCode::Basic,
                    conformity_level: ConformityLevel::BasicIdentificationStreamOnly,
                    more_follows: false,
                    next_object_id: 0,
                    device_id_objects: vec![
                        object(0, "plantd"),
                        object(1, "plantd-sim"),
                        object(2, env!("CARGO_PKG_VERSION")),
                    ],
                })
            }
            _ => return Err(ExceptionCode::IllegalFunction),
        };
        Ok(served)
    }
}

impl tokio_modbus::server::Service for ModbusService {
    type Request = Request<'static>;
    type Response = Response;
    type Exception = ExceptionCode;
    type Future = std::future::Ready<Result<Response, ExceptionCode>>;

    fn call(&self, req: Self::Request) -> Self::Future {
        std::future::ready(self.answer(req))
    }
}

/// Serves Modbus TCP on `listener` until the task is dropped.
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: ModbusService,
) -> std::io::Result<()> {
    let server = tokio_modbus::server::tcp::Server::new(listener);
    let on_connected = |stream, addr| {
        let service = service.clone();
        async move {
            tokio_modbus::server::tcp::accept_tcp_connection(stream, addr, move |_| {
                Ok(Some(service.clone()))
            })
        }
    };
    server
        .serve(
            &on_connected,
            |e| tracing::warn!(error = %e, "modbus connection failed"),
        )
        .await
}
